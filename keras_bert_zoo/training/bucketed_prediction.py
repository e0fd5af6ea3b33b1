"""Evaluation and prediction in length buckets: `predict`, `prediction_buckets`.

Examples are sorted by real length, consecutive batches trimmed to the bucket of their
longest example (`training.batching`'s buckets), outputs put back in the original order and
(for per-token outputs) padded back to the full length with the lowest float, which the
tagging and SQuAD post-processing never select (`word_index` / `token_offsets` are -1
there). Nothing is dropped. Results for real tokens equal full padding.

On TensorFlow on CPU, `predict` runs one TensorFlow graph for every bucket instead of an XLA
program per bucket, even for a model compiled with `jit_compile=True` (the train step keeps
XLA): there the compiled forward pass is no faster per batch, and a compile per bucket costs
more than the pass itself (benchmarks/RESULTS.md, "Length bucketing"). The graph's outputs
are also the same at any batch size. On GPU and TPU, and on JAX and PyTorch, prediction
compiles as the model was compiled; eager PyTorch, like the graph, runs batches trimmed to
steps of 8 tokens without filler rows (`predicts_any_shape`). So does a `runtimes` runner
(ONNX Runtime, OpenVINO): anything that is not a Keras model is run through its own
`run_batches(inputs, batch_size)`, numpy in and out, any shape.

>>> buckets = kbz.training.bucketed_prediction.prediction_buckets(model, 128)
>>> outputs = kbz.training.bucketed_prediction.predict(model, x, 64, buckets, False)
"""

import itertools
import weakref

import keras
import numpy as np

from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow
from keras_bert_zoo.layers.backend import jax_platform
from keras_bert_zoo.training.batching import (
    bucket_ids,
    bucket_lengths,
    real_lengths,
    run_in_batches,
    trim_length,
)
from keras_bert_zoo.training.processes import is_chief, local_forward, process_count
from keras_bert_zoo.training.progress import rows_counter

# Keras on TensorFlow imported it already (the graph forward pass, the device check).
tf = require_tensorflow(TF_DATA_PIPELINES) if keras.backend.backend() == "tensorflow" else None


def prediction_buckets(model, sequence_length: int) -> list[int]:
    """The lengths `predict` trims batches to (one XLA program per bucket):

    - steps of 8 tokens where every length runs without a compile (`predicts_any_shape`);
    - `cpu_bucket_lengths` under XLA on a CPU (JAX): there a batch costs in proportion to its
      tokens, and a few more compiles (each well under a second for MiniLM, kept on disk by
      the compile cache) cost less than powers of two's padding;
    - else (GPU, TPU, `torch.compile`) `bucket_lengths`, powers of two.

    >>> prediction_buckets(model, 40)  # TensorFlow on CPU
    [8, 16, 24, 32, 40]
    """
    if predicts_any_shape(model):
        return list(range(8, sequence_length, 8)) + [sequence_length]
    if jax_platform() == "cpu":
        return cpu_bucket_lengths(sequence_length)
    return bucket_lengths(sequence_length)


def cpu_bucket_lengths(sequence_length: int) -> list[int]:
    """Powers of two from 16 below a step of 32 tokens per 256 of `sequence_length`, then
    multiples of that step (none less than half a step from the end), then `sequence_length`:
    up to 11 buckets for 1,024 tokens, and no batch padded by much more than a step, so fewer
    padded tokens than powers of two's and a faster `kbz embed` on JAX (benchmarks/RESULTS.md,
    "kbz embed vs sentence-transformers recipe").

    >>> cpu_bucket_lengths(256)
    [16, 32, 64, 96, 128, 160, 192, 224, 256]
    >>> cpu_bucket_lengths(512)
    [16, 32, 64, 128, 192, 256, 320, 384, 448, 512]
    """
    step = 32 * -(-sequence_length // 256)
    lengths = [n for n in bucket_lengths(sequence_length) if n < min(step, sequence_length)]
    lengths += list(range(step, sequence_length - step // 2 + 1, step))
    return lengths + [sequence_length]


def predict(
    model,
    x: dict,
    batch_size: int,
    buckets,
    sequence_outputs: bool,
    progress=None,
    label: str = "predict",
):
    """`model.predict(x)` with batches of similar length trimmed to their bucket.

    Examples are sorted by real length; consecutive batches share the bucket of their
    longest example (`prediction_groups`), and each run of batches with one bucket is one
    `model.predict` call of whole batches (the one partial batch, the shortest, is filled up,
    then its filler outputs dropped), so under XLA each bucket compiles one program. Where
    any shape runs without a compile (`predicts_any_shape`: one TensorFlow graph on CPU,
    eager PyTorch) batches get no filler.
    Outputs come back in the original order; with `sequence_outputs` their axis 1 is padded
    back to the full length with the lowest float (never an argmax, never a top logit).
    `progress(rows)` is called after each batch with the number of examples it held; without
    it, the rows go to an enclosing `progress.rows_counted_by`, else, where standard output is
    not a terminal, to plain lines named `label` (`progress.rows_counter`).
    """
    progress = progress or rows_counter(label, len(real_lengths(x)), enabled=is_chief())
    if not isinstance(model, keras.Model):  # a `runtimes` runner
        return _predict(
            model, x, batch_size, buckets, sequence_outputs, model.run_batches, False, progress
        )
    run = graph_forward(model) if predicts_as_graph(model) else None
    if run is None and process_count() > 1:  # Keras' predict cannot fetch such outputs
        run = local_forward(model)
    whole = not predicts_any_shape(model)
    return _predict(model, x, batch_size, buckets, sequence_outputs, run, whole, progress)


def predicts_as_graph(model) -> bool:
    """True on TensorFlow unless the model is XLA-compiled and a GPU or TPU runs it: then
    `predict` runs one graph for every bucket (the module docstring says why)."""
    if keras.backend.backend() != "tensorflow":
        return False  # JAX and PyTorch: Keras' prediction, compiled as the model was
    if not getattr(model, "jit_compile", False):
        return True
    accelerated = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU")
    return not accelerated


def predicts_any_shape(model) -> bool:
    """True where a new batch shape costs no compile: TensorFlow's one graph
    (`predicts_as_graph`), PyTorch running eagerly (its default; `torch.compile`, Keras'
    `jit_compile` there, compiles per shape), or a `runtimes` runner."""
    if not isinstance(model, keras.Model):
        return True
    if keras.backend.backend() == "torch":
        return not getattr(model, "jit_compile", False)
    return predicts_as_graph(model)


_GRAPHS = weakref.WeakKeyDictionary()  # model -> its graph-mode forward pass


def graph_forward(model):
    """`run(inputs, batch_size)`: `model(batch, training=False)` over `inputs` in batches,
    through one TensorFlow graph traced for any batch size and length and kept for the
    model's later passes (it reads the variables, so trained weights show). Keras' `predict`
    traces its function again for a second length, and builds a dataset per call."""
    if model not in _GRAPHS:
        owner = weakref.ref(model)  # the cache must not keep the model alive
        _GRAPHS[model] = tf.function(lambda inputs: owner()(inputs, training=False))
    graph = _GRAPHS[model]

    def run(inputs: dict, batch_size: int, batch_done=None):
        specs = {k: tf.TensorSpec([None, None], tf.as_dtype(v.dtype)) for k, v in inputs.items()}
        function = graph.get_concrete_function(specs)
        return run_in_batches(
            lambda batch: function(tf.nest.map_structure(tf.constant, batch)),
            inputs,
            batch_size,
            batch_done,
        )

    return run


def forget_graph(model) -> None:
    """Drops `model`'s traced forward pass: after its layers change (`model.quantize`), the
    old graph would still compute with the float kernels."""
    _GRAPHS.pop(model, None)


def _predict(
    model,
    x: dict,
    batch_size: int,
    buckets,
    sequence_outputs: bool,
    run=None,
    whole=True,
    progress=None,
):
    total = np.asarray(x["token_ids"]).shape[1]
    lengths = real_lengths(x)
    if not len(lengths):
        return model.predict(x, batch_size=batch_size, verbose=0)
    count = len(lengths)
    results, structure = None, None
    for rows, length in prediction_groups(lengths, batch_size, buckets):
        # Under XLA whole batches only (the partial one filled with repeated rows, whose
        # outputs are dropped): one batch shape, so one program, per bucket. Without a
        # compile per shape, no filler.
        filled = np.resize(rows, -(-len(rows) // batch_size) * batch_size) if whole else rows
        inputs = {key: trim_length(np.asarray(v)[filled], length, True) for key, v in x.items()}
        done = _rows_done(progress, len(rows))
        if run is None:
            shown = [_BatchesDone(done, batch_size)] if done else []
            part = model.predict(inputs, batch_size=batch_size, verbose=0, callbacks=shown)
        else:
            part = run(inputs, batch_size, done)
        structure, parts = part, [host(p)[: len(rows)] for p in keras.tree.flatten(part)]
        if results is None:
            results = [_full(p, count, total, sequence_outputs) for p in parts]
        for result, p in zip(results, parts, strict=True):
            result[rows] = _pad(p, total, result)
    return keras.tree.pack_sequence_as(structure, results)


def _rows_done(progress, rows: int):
    """`batch_done(size)` calling `progress` with a group's real rows of each batch (its
    filler rows, last, are not counted); None without `progress`."""
    if progress is None:
        return None
    left = [rows]

    def batch_done(size: int) -> None:
        step = min(size, left[0])
        left[0] -= step
        progress(step)

    return batch_done


class _BatchesDone(keras.callbacks.Callback):
    """Calls `batch_done(batch_size)` after each batch of Keras' `predict`."""

    def __init__(self, batch_done, batch_size: int):
        super().__init__()
        self.batch_done, self.batch_size = batch_done, batch_size

    def on_predict_batch_end(self, batch, logs=None):
        self.batch_done(self.batch_size)


def prediction_groups(lengths, batch_size: int, buckets) -> list[tuple[np.ndarray, int]]:
    """`(rows, bucket length)` per bucket, in ascending length: the examples sorted by real
    length, cut into batches from the longest end, each batch in the bucket of its longest
    example, and a bucket's batches together. Only the shortest batch can be partial: under
    XLA it is filled up to a whole batch, and filler rows of the shortest bucket cost the
    least (fewer padded tokens than a partial batch at the longest end).

    >>> prediction_groups(np.array([3, 40, 9, 12, 30]), 2, [16, 32, 64])
    [(array([0, 2, 3]), 16), (array([4, 1]), 64)]
    """
    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable")
    ends = np.arange(len(order), 0, -batch_size)[::-1]
    starts = np.maximum(ends - batch_size, 0)
    batch_bucket = bucket_ids(lengths[order[ends - 1]], buckets)
    groups, first = [], 0
    for bucket, batches in itertools.groupby(range(len(ends)), key=lambda b: batch_bucket[b]):
        last = list(batches)[-1]
        groups.append((order[starts[first] : ends[last]], int(buckets[bucket])))
        first = last + 1
    return groups


def host(part) -> np.ndarray:
    """An output as numpy; bfloat16 (a mixed_bfloat16 model's) as float32, which `np.finfo`
    knows (the lowest float pads trimmed positions)."""
    part = np.asarray(part)
    return part.astype(np.float32) if part.dtype.name == "bfloat16" else part


def _full(part: np.ndarray, count: int, total: int, sequence_outputs: bool) -> np.ndarray:
    shape = [count, *part.shape[1:]]
    if sequence_outputs:
        shape[1] = total
    return np.full(shape, np.finfo(part.dtype).min, part.dtype)


def _pad(part: np.ndarray, total: int, result: np.ndarray) -> np.ndarray:
    if result.shape[1:] == part.shape[1:]:
        return part
    width = [(0, 0)] * part.ndim
    width[1] = (0, total - part.shape[1])
    return np.pad(part, width, constant_values=np.finfo(part.dtype).min)
