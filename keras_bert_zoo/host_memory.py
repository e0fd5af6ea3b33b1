"""`tune_process()`: the process-wide settings `kbz`'s own processes run with, for scripts that
want the same. Importing the package applies none of them; the `kbz` entry point applies them
before Keras or JAX is imported (`keras_bert_zoo.cli.run`).

Under JAX on a CPU, every execution of a compiled step asks the C library for one large block
of temporary memory and frees it when the step ends. glibc serves blocks that large with a
fresh `mmap` and unmaps them on free, so every step faults in and zeroes all of its pages again
(a noticeable share of a step's time: benchmarks/RESULTS.md, "JAX vs TensorFlow train step").
TensorFlow does not pay this: its CPU allocator keeps what it frees.

`tune_process()` tells glibc (`mallopt`) to serve large blocks from its heap instead of `mmap`
and to never give the heap's free end back to the system, so a freed step's block is the next
step's, already mapped. The thread that runs XLA's steps must allocate from the main heap:
glibc's per-thread heaps cannot hold such blocks and map them anyway. So it also limits glibc to
that one heap, which only works before a thread first allocates: call it first thing, before
Keras, JAX or PyTorch is imported.

On JAX it also runs CPU computations in the calling thread (`jax_cpu_enable_async_dispatch`
off, which imports JAX). With JAX's asynchronous dispatch, where a computation runs on another
thread while Python goes on, the heap grew by one more block at random steps, late ones too;
inline it grows in the first few steps only (tests/test_backend_jax_host_memory.py).

The price, and why a library must not do this on import: the process keeps its peak memory
until it ends, and every thread shares one heap. `KBZ_KEEP_FREED_MEMORY=0` makes the call (and
so `kbz`) leave glibc's defaults and JAX's dispatch. It applies on JAX and PyTorch, whose CPU
allocators use glibc's; on TensorFlow, and elsewhere than Linux with glibc, it does nothing.
"""

import ctypes
import os
import sys

from keras_bert_zoo.extras import process_backend

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_BACKENDS = ("jax", "torch")

_applied = False


def tune_process(backend: str | None = None) -> bool:
    """Applies the settings above once per process if `backend` (default: the Keras backend
    this process will use) is JAX or PyTorch; returns whether they are in force.

    Call it first in a script that trains or predicts on JAX or PyTorch, as `kbz` does:

    >>> import keras_bert_zoo as kbz
    >>> kbz.tune_process("tensorflow")  # TensorFlow keeps its own memory: nothing to do
    False
    """
    global _applied
    if _applied:
        return True
    if os.environ.get("KBZ_KEEP_FREED_MEMORY", "1") == "0":
        return False
    backend = backend or process_backend()
    if backend not in _BACKENDS or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):  # musl and others: other allocators
        return False
    _applied = bool(
        libc.mallopt(_M_ARENA_MAX, 1)
        and libc.mallopt(_M_TRIM_THRESHOLD, -1)  # -1: never trim (mallopt(3))
        and libc.mallopt(_M_MMAP_MAX, 0)  # 0: never mmap a block
    )
    if _applied and backend == "jax":
        try:
            import jax  # the backend this process runs on
        except ImportError:  # not installed: Keras' import stops with its own message
            return _applied
        # Read when JAX's CPU client starts: after a first computation this changes nothing.
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    return _applied
