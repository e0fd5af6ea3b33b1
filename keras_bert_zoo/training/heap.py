"""Keeps Python's cyclic garbage collector off the objects a training run holds for good.

At the end of a `kbz finetune` run the process holds hundreds of thousands of Python objects:
the model's layers and variables and the traced graphs of every train and prediction program.
Python's oldest-generation collection walks all of them once enough new objects survive, and
the SavedModel export's tracing makes that happen. Where the host reclaims memory pages left
untouched during training (this project's VMs do), the walk faults every page back in and can
stall the run for many seconds with the CPU idle (benchmarks/RESULTS.md, "Fixed costs of a
fine-tuning run").

`frozen_heap()` moves the objects alive at the start of training into Python's permanent
generation (`gc.freeze`), which collections skip, and the run calls the `refreeze` it yields
again before each phase that traces new programs after a long stretch of steps (validation,
the export). Nothing is walked on the way in (no `gc.collect`: that walk is the cost). When
the run ends, `gc.unfreeze` hands the objects back, so a notebook that called the run
collects them as usual. A caller that had frozen its own heap before the run (a server that
freezes before forking, a test harness) keeps it frozen: `gc.unfreeze` cannot tell its objects
from the run's, so only a block that began with nothing frozen unfreezes at its end.
"""

import contextlib
import gc


@contextlib.contextmanager
def frozen_heap():
    """Freezes the objects alive now for the duration of the block; yields `refreeze`."""
    outermost = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        if outermost:
            gc.unfreeze()
