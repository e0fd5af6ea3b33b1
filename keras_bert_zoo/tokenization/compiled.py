"""Eager calls of the tokenization layers run as cached `tf.function`s.

Eager ragged ops are about 50x slower than the same ops in a graph, so an eager call is
traced once per input kind and reused; inside a graph (tf.data, tf.function, SavedModel
export) the function runs inline.
"""

import tensorflow as tf


def compiled_call(layer, key, function, *tensors):
    """Runs `function` as a cached tf.function when called eagerly (eager ragged ops are ~50x
    slower), inline when already in a graph (tf.data, tf.function, SavedModel export). String
    inputs are batches [batch]."""
    if not tf.executing_eagerly():
        return function(*tensors)
    cache = layer.__dict__.setdefault("_compiled_functions", {})  # untracked on purpose
    if key not in cache:
        strings = all(isinstance(t, tf.Tensor) and t.dtype == tf.string for t in tensors)
        signature = [tf.TensorSpec([None], tf.string)] * len(tensors) if strings else None
        cache[key] = tf.function(function, input_signature=signature, reduce_retracing=True)
    return cache[key](*tensors)
