"""Eager calls of the tokenization layers run as cached `tf.function`s.

Eager ragged ops are many times slower than the same ops in a graph, so an eager call is
traced once per input kind and reused; inside a graph (tf.data, tf.function, SavedModel
export) the function runs inline.

The tokenizer's graph code has no Python control flow on tensors (`tf.cond` where it needs one),
so it is traced without AutoGraph: AutoGraph's conversion of it took most of a first call (the
same ids without it), and of a short `kbz pretrain`'s data building (benchmarks/RESULTS.md).
`graph.py` marks its entry points `do_not_convert` for the same reason, so a user's
own `tf.function` or `tf.data` map around the tokenizer does not convert them either.
"""

import tensorflow as tf


def compiled_call(layer, key, function, *tensors):
    """Runs `function` as a cached tf.function when called eagerly (eager ragged ops are much
    slower), inline when already in a graph (tf.data, tf.function, SavedModel export). String
    inputs are batches [batch]."""
    if not tf.executing_eagerly():
        return function(*tensors)
    cache = layer.__dict__.setdefault("_compiled_functions", {})  # untracked on purpose
    if key not in cache:
        strings = all(isinstance(t, tf.Tensor) and t.dtype == tf.string for t in tensors)
        signature = [tf.TensorSpec([None], tf.string)] * len(tensors) if strings else None
        cache[key] = tf.function(
            function, input_signature=signature, reduce_retracing=True, autograph=False
        )
    return cache[key](*tensors)
