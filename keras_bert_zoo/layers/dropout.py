"""`keras.layers.Dropout` with a faster random mask inside XLA-compiled TensorFlow steps.

Why not Keras' own: on the TensorFlow backend Keras draws the mask with
`tf.nn.experimental.stateless_dropout` and TensorFlow's automatic choice of generator (Philox).
Compiled by XLA on CPU that generator is the slow part of BERT's training step, and Threefry
(the generator JAX uses by default) draws such a mask several times faster, so dropout then
costs about nothing (`benchmarks/train_step_variants.py`; benchmarks/RESULTS.md,
"Dropout's mask generator"). TensorFlow has Threefry kernels only
inside XLA, so this layer uses it only while tracing under `jit_compile=True` and otherwise
behaves exactly like `keras.layers.Dropout` (same seed generator, same saved variables).
The check for an XLA trace is TensorFlow's own (the one `tf.function(jit_compile=True)`
enters), imported from a private module; if a TensorFlow release moves it, the layer falls
back to Keras' path rather than failing. On JAX and PyTorch the layer is exactly
`keras.layers.Dropout` (the backend's own generator; JAX's default is Threefry already) and
imports no TensorFlow; its seed state is the same saved variable on every backend, so exact
resume restores it everywhere.
"""

import keras

from keras_bert_zoo.layers.backend import tf

control_flow_util = None
if tf is not None:  # TensorFlow backend only
    try:  # private TensorFlow module: if a release moves it, Keras' generator is used
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - depends on the TensorFlow release
        control_flow_util = None


def in_xla_trace() -> bool:
    """True while TensorFlow traces a function compiled with `jit_compile=True`."""
    if (
        control_flow_util is None
        or tf is None
        or keras.backend.backend() != "tensorflow"
        or tf.executing_eagerly()
    ):
        return False
    try:
        return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
    except AttributeError:  # the helper was renamed: use Keras' generator
        return False


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, drawing its mask with Threefry inside XLA-compiled steps."""

    def call(self, inputs, training=False):
        if not (training and self.rate > 0 and self.noise_shape is None and in_xla_trace()):
            return super().call(inputs, training=training)
        seed = self.seed_generator.next()
        # Stateless TensorFlow ops want an int32 seed; Keras keeps int64 state (as Keras does).
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, rng_alg="threefry"
        )
