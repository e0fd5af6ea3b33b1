"""`kbz embed` on JAX keeps its XLA prediction programs on disk (`--compile-cache`).

Collected only in the JAX process (conftest.py). Each run is a fresh interpreter: JAX's
persistent cache is set up once per process, and the same process would answer from its
in-memory cache. JAX reports every program it loaded from disk as a monitoring event,
`/jax/compilation_cache/cache_hits`, which the runs below count.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

ROOT = Path(__file__).resolve().parent.parent
THRESHOLD_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"

# `kbz embed` in-process, counting the programs JAX read from its persistent cache.
EMBED = """
import sys
import jax
hits = []
jax.monitoring.register_event_listener(
    lambda event, **_: hits.append(1) if event == "/jax/compilation_cache/cache_hits" else None)
from keras_bert_zoo.cli import main
status = main(["embed", "--model", sys.argv[1], "--input", sys.argv[2], "--output", sys.argv[3],
               "--batch-size", "4", *sys.argv[4:]])
print("THRESHOLD", jax.config.jax_persistent_cache_min_compile_time_secs)
print("HITS", len(hits), "STATUS", status)
"""


def _embed(tmp_path, output, *flags, **env):
    preset = tmp_path / "preset"
    if not preset.exists():
        save_tiny_preset(preset)
        texts = ["a short one", "a longer line of text " * 6, "the", "two words"] * 3
        (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    command = [sys.executable, "-c", EMBED, str(preset), str(tmp_path / "texts.txt")]
    command += [str(tmp_path / output), *flags]
    inherited = {k: v for k, v in os.environ.items() if k != THRESHOLD_ENV}
    environment = {**inherited, "KERAS_BACKEND": "jax", **env}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and "STATUS 0" in done.stdout, done.stderr[-3000:]
    line = lambda name: done.stdout.split(name)[1].split()[0]  # noqa: E731
    return float(line("THRESHOLD")), int(line("HITS"))


def _entries(directory: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()}


@pytest.mark.e2e  # fresh interpreters
def test_kbz_embed_again_loads_its_prediction_programs_from_disk(tmp_path):
    cache = tmp_path / "xla"
    # The tiny model's programs compile in well under the default threshold (0.2 s, for
    # MiniLM's 0.6 s programs): JAX's own setting, when given, wins.
    quick = {THRESHOLD_ENV: "0"}
    threshold, hits = _embed(tmp_path, "first.npy", "--compile-cache", str(cache), **quick)
    assert (threshold, hits) == (0.0, 0)
    written = _entries(cache)
    assert written, "the first run wrote no compiled program"

    threshold, hits = _embed(tmp_path, "again.npy", "--compile-cache", str(cache), **quick)
    assert hits >= len(written)  # every program the first run wrote, read back
    assert _entries(cache) == written  # nothing compiled again, nothing rewritten
    np.testing.assert_array_equal(np.load(tmp_path / "again.npy"), np.load(tmp_path / "first.npy"))


@pytest.mark.e2e  # fresh interpreters
def test_jax_cache_threshold_default_and_off(tmp_path):
    from keras_bert_zoo.training import compile_cache

    threshold, _ = _embed(tmp_path, "default.npy", "--compile-cache", str(tmp_path / "xla"))
    assert threshold == compile_cache.JAX_MIN_COMPILE_SECONDS
    threshold, hits = _embed(tmp_path, "off.npy", "--compile-cache", "off")
    assert (threshold, hits) == (1.0, 0)  # JAX's own default: the cache was never set up
