"""`training.heap.frozen_heap`: the run's objects skip the collector's walks, and come back."""

import gc
import weakref

from keras_bert_zoo.training.heap import frozen_heap


class Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self):
        self.me = self


def test_objects_alive_at_each_freeze_are_skipped_then_handed_back():
    gc.collect()
    assert gc.get_freeze_count() == 0
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
    try:
        with frozen_heap():
            raise RuntimeError("training failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
