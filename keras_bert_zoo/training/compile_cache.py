"""A persistent XLA compilation cache: the second run of a job skips its XLA compiles.

Every `kbz finetune` run compiles one train step per length bucket and one prediction program
per bucket, a large share of a short run (benchmarks/RESULTS.md, "Fixed costs of a fine-tuning
run"), and a resumed or repeated run (or `kbz predict` or `kbz embed` again on the same model,
batch size and lengths) compiled the very same programs again.
TensorFlow and JAX can keep compiled executables on disk; this module switches that on in a
directory that is safe to share:

- one folder per backend version and CPU instruction set (`xla/tensorflow-2.21.0-<hash>`):
  an executable built for AVX-512 must never load on a machine without it (a home directory
  on NFS serves several machines), and a newer TensorFlow rebuilds rather than guesses;
- checked before use: created, writable, with room to spare. TensorFlow fails every compile
  when the directory is missing or unwritable, so a cache that cannot work is switched off
  with a warning instead, and the run goes on without it;
- bounded: past `max_bytes` the least recently written entries go first.

TensorFlow keys an entry by the program's HLO fingerprint and verifies it on load, so a
stale entry is never used for another program. Seeds are variables, not constants, so runs
that differ only in `--seed` share entries; another learning rate or step count compiles anew.

>>> kbz.training.enable_compile_cache()  # before the first XLA compile of the process
PosixPath('~/.cache/keras_bert_zoo/xla/tensorflow-2.21.0-1a2b3c4d5e6f')
"""

import hashlib
import logging
import os
import platform
import shutil
import uuid
from pathlib import Path

import keras

from keras_bert_zoo.presets.registry import cache_dir

logger = logging.getLogger(__name__)

ENV = "KBZ_COMPILE_CACHE"  # a directory, or "off" / "0" / "none" to switch the cache off
OFF = ("off", "0", "none", "false", "no")
MAX_BYTES = 2 * 1024**3  # about 300 MiniLM train-step entries (6 MB each)
MIN_FREE_BYTES = 1024**3  # never fill the disk a run writes its checkpoints to
TF_FLAG = "--tf_xla_persistent_cache_directory"
# JAX writes only programs that took this long to compile. Its own default, 1 s, left out
# every prediction program (a MiniLM bucket compiles in less on a CPU); the eager ops' tiny
# programs stay out. `$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`,
# when set, wins.
JAX_MIN_COMPILE_SECONDS = 0.2


def _cpu_features() -> str:
    """The CPU's instruction-set flags (Linux /proc/cpuinfo), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return platform.processor()


def _backend_version(backend: str) -> str:
    module = {"tensorflow": "tensorflow", "jax": "jaxlib"}[backend]
    return __import__(module).__version__


def default_directory(backend: str | None = None) -> Path:
    """`$KBZ_COMPILE_CACHE`, else `<kbz cache>/xla/<backend>-<version>-<CPU hash>`."""
    backend = backend or keras.backend.backend()
    chosen = os.environ.get(ENV, "").strip()
    if chosen and not switched_off():
        return Path(chosen).expanduser()
    machine = f"{platform.machine()} {_cpu_features()}"
    digest = hashlib.sha256(machine.encode()).hexdigest()[:12]
    return cache_dir() / "xla" / f"{backend}-{_backend_version(backend)}-{digest}"


def switched_off() -> bool:
    """`$KBZ_COMPILE_CACHE` says off."""
    return os.environ.get(ENV, "").strip().lower() in OFF


def _usable(directory: Path) -> str | None:
    """Why `directory` cannot hold the cache, or None when it can."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".probe-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        return f"it cannot be written ({error.strerror or error})"
    free = shutil.disk_usage(directory).free
    if free < MIN_FREE_BYTES:
        return f"its disk has {free / 1024**2:.0f} MiB free (less than 1 GiB)"
    return None


def prune(directory: Path, max_bytes: int = MAX_BYTES) -> int:
    """Deletes the least recently written entries past `max_bytes`; returns how many."""
    entries = []
    for path in directory.iterdir():
        try:
            if path.is_file() and not path.name.startswith("."):
                stat = path.stat()
                entries.append((stat.st_mtime, stat.st_size, path))
        except OSError:  # removed by a concurrent run meanwhile
            continue
    total, removed = sum(size for _, size, _ in entries), 0
    for _, size, path in sorted(entries):
        if total <= max_bytes:
            break
        path.unlink(missing_ok=True)
        total, removed = total - size, removed + 1
    return removed


def _tensorflow_flag() -> str | None:
    """The cache directory already given in `TF_XLA_FLAGS`, if any."""
    for flag in os.environ.get("TF_XLA_FLAGS", "").split():
        if flag.startswith(TF_FLAG + "="):
            return flag.split("=", 1)[1]
    return None


def enable_compile_cache(directory=None, max_bytes: int = MAX_BYTES) -> Path | None:
    """Keeps compiled XLA programs in `directory` (default: `default_directory()`).

    Call it before the process compiles anything with XLA: TensorFlow reads its flags once, at
    the first compile. Returns the directory in use, or None when the cache is off
    (`$KBZ_COMPILE_CACHE=off`, the PyTorch backend, or a directory that cannot work, which is
    logged as a warning). A directory already set in `TF_XLA_FLAGS` is left as it is.
    """
    backend = keras.backend.backend()
    if (directory is None and switched_off()) or backend not in ("tensorflow", "jax"):
        return None
    if backend == "tensorflow" and _tensorflow_flag():
        return Path(_tensorflow_flag())
    directory = Path(directory).expanduser() if directory else default_directory(backend)
    problem = _usable(directory)
    if problem:
        logger.warning(
            "The XLA compilation cache %s is off: %s. Runs compile as usual; set %s to another "
            "directory (or to 'off') to silence this.",
            directory,
            problem,
            ENV,
        )
        return None
    prune(directory, max_bytes)
    if backend == "tensorflow":
        os.environ["TF_XLA_FLAGS"] = f"{os.environ.get('TF_XLA_FLAGS', '')} {TF_FLAG}={directory}"
    else:
        import jax  # the running backend: already imported by Keras

        jax.config.update("jax_compilation_cache_dir", str(directory))
        if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", JAX_MIN_COMPILE_SECONDS)
    logger.info("XLA compilation cache: %s", directory)
    return directory
