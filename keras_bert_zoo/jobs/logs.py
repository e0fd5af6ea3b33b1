"""The TensorBoard logs of the training jobs (`finetune`, `pretrain`): `tensorboard(output)`."""

import logging
from pathlib import Path

import keras

from keras_bert_zoo.extras import TENSORFLOW_EXTRA, tensorflow_installed

logger = logging.getLogger(__name__)


class TensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard callback, with the epoch scalars always written.

    Keras 3.15 writes epoch scalars inside the `record_if` of the last batch, so with an
    integer `update_freq` that the step count does not hit they are dropped: fit for 8 steps
    with `update_freq=50` logged no `epoch_loss` at all (`tests/test_runs.py` checks ours).
    """

    def on_epoch_end(self, epoch, logs=None):
        with self.summary.record_if(True):
            super().on_epoch_end(epoch, logs)


def tensorboard(output: Path) -> keras.callbacks.Callback:
    """Loss every 50 steps; per interval the loss, learning rate and validation metrics.
    Keras writes them with `tf.summary`: without TensorFlow, a callback that does nothing."""
    if not tensorflow_installed():
        logger.info("No TensorBoard logs: they need TensorFlow (%s).", TENSORFLOW_EXTRA)
        return keras.callbacks.Callback()
    return TensorBoard(str(output / "logs"), update_freq=50)
