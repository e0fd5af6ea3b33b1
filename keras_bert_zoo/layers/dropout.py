"""`keras.layers.Dropout` with a faster random mask inside XLA-compiled TensorFlow steps.

Why not Keras' own: on the TensorFlow backend Keras draws the mask with
`tf.nn.experimental.stateless_dropout` and TensorFlow's automatic choice of generator (Philox).
Compiled by XLA on CPU that generator is the slow part of BERT's training step, and Threefry
(the generator JAX uses by default) draws such a mask several times faster, so dropout then
costs about nothing (`benchmarks/train_step_variants.py`; benchmarks/RESULTS.md,
"Dropout's mask generator"). TensorFlow has Threefry kernels only
inside XLA, so this layer uses it only while tracing under `jit_compile=True` and otherwise
behaves exactly like `keras.layers.Dropout` (same seed generator, same saved variables).
The check for an XLA trace is TensorFlow's own (`layers.backend.in_xla_trace`); if a
TensorFlow release moves it, the layer falls back to Keras' path rather than failing.
On JAX the mask comes from XLA's own Threefry (`jax.lax.rng_bit_generator`, the generator
TensorFlow's XLA path uses) instead of `jax.random.bernoulli`, whose Threefry is written out in
jax.numpy and ran several times slower for one attention mask on a CPU
(`benchmarks/jax_train_step.py`, benchmarks/RESULTS.md). On PyTorch the mask is
drawn by a `torch.Generator` seeded from the layer's seed state: Keras' own PyTorch dropout of
an unseeded layer draws from torch's global generator, which no checkpoint holds, so a resumed
run's masks differed from an uninterrupted run's. No backend but TensorFlow imports
TensorFlow; the seed state is the same saved variable on every backend, so exact resume
restores it everywhere.
"""

import keras
import numpy as np

from keras_bert_zoo.layers.backend import in_xla_trace, jax, tf, torch


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, drawing its mask with Threefry inside XLA-compiled steps."""

    def call(self, inputs, training=False):
        masked = training and self.rate > 0 and self.noise_shape is None
        if masked and jax is not None:
            return self._jax_dropout(inputs)
        if masked and torch is not None:
            return self._torch_dropout(inputs)
        if not (masked and in_xla_trace()):
            return super().call(inputs, training=training)
        seed = self.seed_generator.next()
        # Stateless TensorFlow ops want an int32 seed; Keras keeps int64 state (as Keras does).
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, rng_alg="threefry"
        )

    def _jax_dropout(self, inputs):
        seed = jax.numpy.asarray(self.seed_generator.next(), "uint32")  # [2], advanced per call
        # XLA's Threefry key is (key, counter): the seed is the key, the counter starts at 0
        key = jax.numpy.concatenate([seed, jax.numpy.zeros(2, "uint32")])
        _, bits = jax.lax.rng_bit_generator(
            key, inputs.shape, "uint32", algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY
        )
        keep = bits >= np.uint32(min(round(self.rate * 2**32), 2**32 - 1))  # P = 1 - rate
        scaled = inputs * keras.ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return jax.numpy.where(keep, scaled, jax.numpy.zeros_like(inputs))

    def _torch_dropout(self, inputs):
        # The (layer seed, call counter) pair of the saved seed state, as one 64-bit seed:
        # distinct per layer and per call, and restored by a checkpoint.
        generator = None  # shapes only ("meta" tensors, Keras' output-spec pass): no draw
        if inputs.device.type != "meta":
            state = self.seed_generator.next().tolist()
            first, second = (int(v) & 0xFFFFFFFF for v in state)
            generator = torch.Generator(device=inputs.device)
            generator.manual_seed((first << 32) | second)
        noise = torch.rand(inputs.shape, generator=generator, device=inputs.device)
        scaled = inputs * (1.0 / (1.0 - self.rate))
        return torch.where(noise >= self.rate, scaled, torch.zeros_like(inputs))
