"""`training.heap.frozen_heap`: the run's objects skip the collector's walks, and come back."""

import gc
import weakref

from keras_bert_zoo.training.heap import frozen_heap


class Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self):
        self.me = self


def test_objects_alive_at_each_freeze_are_skipped_then_handed_back():
    gc.unfreeze()  # nothing frozen before the block (tests/conftest.py freezes between tests)
    gc.collect()
    early = Node()
    with frozen_heap() as refreeze:
        frozen = gc.get_freeze_count()
        assert frozen > 0 and gc.is_tracked(early)
        late = Node()
        refreeze()
        assert gc.get_freeze_count() > frozen  # `late` joined the permanent generation
        probe = weakref.ref(late)
        del late
        gc.collect()
        assert probe() is not None  # frozen garbage is not walked, so not freed yet
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert probe() is None  # handed back: collected as usual after the run


def test_an_error_inside_still_unfreezes():
    gc.unfreeze()
    try:
        with frozen_heap():
            raise RuntimeError("training failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0


def test_a_heap_the_caller_froze_stays_frozen():
    gc.collect()
    gc.freeze()  # as a server does before forking, or tests/conftest.py between tests
    try:
        with frozen_heap() as refreeze:
            late = Node()
            refreeze()
        probe = weakref.ref(late)
        del late
        gc.collect()
        assert probe() is not None  # still frozen after the block: nothing handed back
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
