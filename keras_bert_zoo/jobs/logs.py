"""The TensorBoard logs of the training jobs (`finetune`, `pretrain`): `tensorboard(output)`.

Logs are a nice-to-have: where they cannot be written (no TensorFlow, or TensorFlow without
TensorBoard, which TensorFlow 2.21 no longer installs) the run says so once, when it starts
(`check_tensorboard`), and writes everything else.
"""

import importlib
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


def tensorboard_missing() -> str | None:
    """Why this process cannot write TensorBoard logs, or None: Keras writes them with
    `tf.summary`, which needs TensorFlow and the `tensorboard` package."""
    if not tensorflow_installed("tensorflow"):
        return f"they need TensorFlow ({TENSORFLOW_EXTRA})"
    try:
        importlib.import_module("tensorboard.summary.v2")  # what `tf.summary.scalar` imports
    except ImportError:
        return f"TensorBoard is not installed ({TENSORFLOW_EXTRA}, or pip install tensorboard)"
    return None


def check_tensorboard(output: Path) -> None:
    """At a run's start: one line when the run will write no logs. Off TensorFlow that is
    expected (an informational line); with TensorFlow but without TensorBoard, a warning."""
    missing = tensorboard_missing()
    if missing is None:
        return
    on_tensorflow = tensorflow_installed("tensorflow")
    log = logger.warning if on_tensorflow else logger.info
    log("No TensorBoard logs in %s: %s. The run writes everything else.", output / "logs", missing)


def tensorboard(output: Path) -> keras.callbacks.Callback:
    """Loss every 50 steps; per interval the loss, learning rate and validation metrics.
    Where they cannot be written (`tensorboard_missing`), a callback that does nothing."""
    if tensorboard_missing():
        return keras.callbacks.Callback()
    return TensorBoard(str(output / "logs"), update_freq=50)
