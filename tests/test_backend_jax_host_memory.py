"""`kbz.tune_process()` on JAX: XLA:CPU's freed step memory is kept for the next step; the
`kbz` entry point applies it, and importing the package changes nothing in the process.

Each check is its own Python process (the settings are per process and must come before XLA's
threads allocate), started the way a user's script starts: the package, then JAX.
The page faults of a step are counted with `getrusage`: a step whose temporary memory is
mapped afresh faults in every page of it; a step that reuses the last one's faults in none.
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's allocator settings: Linux only"
)

# A step with a 64 MiB temporary (one [16384, 1024] float32 activation, between two cheap
# matmuls), run 100 times; prints the minor page faults of each run.
STEPS = r"""
import json, os, resource
import keras_bert_zoo as kbz
if os.environ["TUNE"] == "1":
    kbz.tune_process()
import jax, jax.numpy as jnp

@jax.jit
def step(x, w):
    y = jnp.tanh(x @ w)
    return (y @ w.T).sum() + y[::-1].sum()

x, w = jnp.ones((16384, 64)), jnp.ones((64, 1024)) / 64
faults = []
for _ in range(100):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step(x, w).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""
TEMPORARY_PAGES = 16384 * 1024 * 4 // 4096


def step_faults(tune: bool, **env) -> list[int]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "TUNE": str(int(tune)), **env}
    env.pop("XLA_FLAGS", None)  # the tier's fake devices and compile flags: not a user's
    result = subprocess.run(
        [sys.executable, "-c", STEPS], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])


def test_xla_steps_reuse_the_memory_the_last_step_freed():
    kept = step_faults(tune=True)
    released = step_faults(tune=False)  # importing the package leaves glibc's defaults
    # glibc's defaults: every step maps its temporary afresh and faults all of its pages in.
    assert min(released) > TEMPORARY_PAGES, released
    # Kept: most steps reuse the heap; at a few it grows by about one temporary (the freed
    # block no longer fits where it was). Those come mostly first, but not only: 30 runs of 100
    # steps grew it at 1-5 steps, in 4 runs after step 10, the latest at step 79 (with JAX's
    # asynchronous dispatch, which `tune_process` turns off: 1-7 steps, in 1 run at steps 81-85).
    # What it grew by is what the process keeps: a bounded fraction of the pages the default
    # faults in.
    grew = [step for step, faults in enumerate(kept) if faults > 100]
    assert len(grew) <= 15, (grew, kept)
    assert sum(kept) < sum(released) / 4, (sum(kept), sum(released))


def seen(tmp_path, tensorflow=True, **env) -> tuple:
    """`(backend, settings applied, Keras imported)` in a fresh process that calls
    `kbz.tune_process()`, with `env` over a home and Keras home of its own (`tmp_path`);
    without `tensorflow`, TensorFlow is not installed there (as in a `.[jax]` environment)."""
    code = "" if tensorflow else "import sys; sys.modules['tensorflow'] = None; "
    code += (
        "import json, sys; from keras_bert_zoo import host_memory as h; h.tune_process(); "
        "print(json.dumps([h.process_backend(), h._applied, 'keras' in sys.modules]))"
    )
    return tuple(json.loads(printed(tmp_path, code, **env)))


def printed(tmp_path, code: str, **env) -> str:
    """The last line `code` prints in a fresh process whose environment has no `KERAS_` or
    `KBZ_` settings but `env`'s, and a home of its own (`tmp_path`)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KERAS_", "KBZ_"))}
    env = {**base, "HOME": str(tmp_path), **env}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()[-1]


def test_the_backend_is_read_as_keras_reads_it_without_importing_keras(tmp_path):
    assert seen(tmp_path) == ("tensorflow", False, False)  # Keras' default: nothing applied
    assert seen(tmp_path, KERAS_BACKEND="jax") == ("jax", True, False)
    home = tmp_path / "keras_home"
    home.mkdir()
    (home / "keras.json").write_text(json.dumps({"backend": "torch"}))
    assert seen(tmp_path, KERAS_HOME=str(home)) == ("torch", True, False)
    assert seen(tmp_path, KERAS_HOME=str(home), KERAS_BACKEND="tensorflow")[:2] == (
        "tensorflow",
        False,
    )
    (home / "keras.json").write_text("{not json")
    assert seen(tmp_path, KERAS_HOME=str(home))[:2] == ("tensorflow", False)


def test_where_the_configured_backend_is_missing_the_one_kbz_runs_on_is_set_up(tmp_path):
    # Keras' default, TensorFlow, not installed: `kbz` runs on JAX (`extras.choose_backend`),
    # and `tune_process` sets the process up for it, without importing Keras.
    assert seen(tmp_path, tensorflow=False) == ("jax", True, False)
    assert seen(tmp_path, tensorflow=False, KERAS_BACKEND="torch") == ("torch", True, False)


def test_keep_freed_memory_0_leaves_glibc_defaults(tmp_path):
    assert seen(tmp_path, KERAS_BACKEND="jax", KBZ_KEEP_FREED_MEMORY="0")[:2] == ("jax", False)


def async_dispatch(tmp_path, imports: str, **env) -> bool:
    """JAX's `jax_cpu_enable_async_dispatch` in a fresh process after `imports`."""
    code = f"{imports}; import jax; print(jax.config.values['jax_cpu_enable_async_dispatch'])"
    return printed(tmp_path, code, **env) == "True"


def test_jax_runs_cpu_computations_inline_where_freed_memory_is_kept(tmp_path):
    tune = "import keras_bert_zoo as kbz; kbz.tune_process()"
    # JAX imported after the call (the call imports it) or before it
    assert not async_dispatch(tmp_path, tune, KERAS_BACKEND="jax")
    assert not async_dispatch(tmp_path, f"import jax; {tune}", KERAS_BACKEND="jax")
    # JAX's default where the settings do not apply
    off = {"KERAS_BACKEND": "jax", "KBZ_KEEP_FREED_MEMORY": "0"}
    assert async_dispatch(tmp_path, tune, **off)
    assert async_dispatch(tmp_path, tune, KERAS_BACKEND="torch")


# What a process looks like: its import finders, JAX's dispatch, and whether glibc serves a
# 64 MiB block with `mmap` (its default; `tune_process` turns that off, so a changed
# allocator setting shows here: mallinfo2's `hblkhd` counts the bytes held in mmapped blocks).
STATE = r"""
import ctypes, json, sys

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def state():
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(64 << 20)
    mmapped = libc.mallinfo2().hblkhd - before >= 64 << 20
    libc.free(block)
    jax = sys.modules.get("jax")
    dispatch = jax.config.values["jax_cpu_enable_async_dispatch"] if jax else None
    finders = [finder if isinstance(finder, type) else type(finder) for finder in sys.meta_path]
    finders = [f"{finder.__module__}.{finder.__qualname__}" for finder in finders]
    return {"meta_path": finders, "mmap": mmapped,
            "async_dispatch": dispatch}
"""


def process_state(tmp_path, code: str, **env) -> list:
    """The `state()`s that `code` prints (one JSON list) in a fresh process on JAX."""
    return json.loads(printed(tmp_path, STATE + code, KERAS_BACKEND="jax", **env))


def test_importing_the_package_then_jax_and_keras_changes_nothing_in_the_process(tmp_path):
    (without,) = process_state(tmp_path, "import jax, keras\nprint(json.dumps([state()]))")
    start, package, imported, tuned = process_state(
        tmp_path,
        "start = state()\n"
        "import keras_bert_zoo as kbz\n"
        "package = state()\n"
        "import jax, keras\n"
        "kbz.build_encoder  # a model API name loads Keras' side of the package\n"
        "imported = state()\n"
        "kbz.tune_process()\n"
        "print(json.dumps([start, package, imported, state()]))",
    )
    assert package == start  # nothing waits for JAX's import either
    assert without["async_dispatch"] and without["mmap"]  # JAX's and glibc's defaults
    # No finder added, JAX's dispatch and glibc's mmap as in a process without the package
    assert imported == without
    # The check can fail: the explicit call changes both.
    assert tuned == {**without, "async_dispatch": False, "mmap": False}


def test_the_kbz_entry_point_applies_the_settings_before_its_command(tmp_path):
    code = (
        "from keras_bert_zoo import cli\n"
        "cli.main = lambda argv=None, restart=None: print(json.dumps([state()])) or 0\n"
        "cli.run()\n"
    )
    (seen_by_command,) = process_state(tmp_path, code)
    assert seen_by_command["mmap"] is False and seen_by_command["async_dispatch"] is False
    (untuned,) = process_state(tmp_path, code, KBZ_KEEP_FREED_MEMORY="0")
    assert untuned["mmap"] is True and untuned["async_dispatch"] is None  # JAX not imported
