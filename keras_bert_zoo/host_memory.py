"""Keeps the memory that XLA:CPU frees inside the process, for its next step to reuse.

Under JAX on a CPU, every execution of a compiled step asks the C library for one block of
temporary memory (1.2 GB for a bert_small train step at batch 32 x 128 tokens) and frees it
when the step ends. glibc serves blocks that large with a fresh `mmap` and unmaps them on free,
so every step faulted in and zeroed 300,000 new pages: 13% of the step's time
(benchmarks/RESULTS.md, "JAX vs TensorFlow train step"). TensorFlow does not pay this: its CPU
allocator (oneDNN's BFC allocator) keeps what it frees.

`keep_freed_memory()` tells glibc (`mallopt`) to serve large blocks from its heap instead of
`mmap` and to never give the heap's free end back to the system, so a freed step's block is
the next step's, already mapped. Both are per process, and the thread that runs XLA's steps
must allocate from the main heap: glibc's per-thread heaps cannot hold such blocks and map them
anyway. So it also limits glibc to that one heap, which only works before a thread first
allocates: `import keras_bert_zoo` calls it, which is early enough when the package is
imported before a model is built (the command line always is).

On JAX it also runs CPU computations in the calling thread (`jax_cpu_enable_async_dispatch`
off, set when JAX is imported). With JAX's asynchronous dispatch, where a computation runs on
another thread while Python goes on, the heap grew by one more block at random steps, late ones
too (bert_small's train step through `fit`: resident memory 4.9 GB, against 2.6 GB inline at the
same speed and 2.8 GB at its peak under glibc's defaults); inline it grows in the first few
steps only (tests/test_backend_jax_host_memory.py).

The price: the process keeps its peak memory until it ends. `KBZ_KEEP_FREED_MEMORY=0` leaves
glibc's defaults and JAX's dispatch.
It applies on JAX and PyTorch, whose CPU allocators use glibc's; on TensorFlow it does nothing.
Elsewhere than Linux with glibc it does nothing either.
"""

import ctypes
import importlib.abc
import importlib.util
import os
import sys

from keras_bert_zoo.extras import process_backend

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_BACKENDS = ("jax", "torch")

_applied = False


def keep_freed_memory(backend: str | None = None) -> bool:
    """Applies the settings above once per process if `backend` (default: the Keras backend
    this process will use) is JAX or PyTorch; returns whether they are in force."""
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
        _when_imported("jax", _run_jax_inline)
    return _applied


def _run_jax_inline(jax) -> None:
    """JAX's CPU client runs each computation in the calling thread (read when the client
    starts, so too late once a computation ran: then this changes nothing)."""
    jax.config.update("jax_cpu_enable_async_dispatch", False)


def _when_imported(name: str, action) -> None:
    """`action(module)` once the top-level module `name` is imported: now if it is, else
    right after its import (a one-time finder first in `sys.meta_path`), so that importing
    this package imports nothing more."""
    if name in sys.modules:
        if sys.modules[name] is not None:  # None: its import is blocked, it never comes
            action(sys.modules[name])
        return

    class AfterImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            if spec is None or spec.loader is None:
                return spec
            loader, exec_module = spec.loader, spec.loader.exec_module

            def exec_then_act(module):
                del loader.exec_module  # the loader's own again (a loader may be shared)
                exec_module(module)
                action(module)

            loader.exec_module = exec_then_act  # the same loader: its resources stay its own
            return spec

    sys.meta_path.insert(0, AfterImport())
