"""Packed prediction: a classifier's logits (a reranker's pairs' too) or an embedder's
vectors from rows holding several examples each.

Length buckets (`training.bucketed_prediction`) still pad every example to its bucket; short
texts (SST-2's sentences) spend a quarter to two thirds of their token positions on padding
there. Here the examples are packed into rows by best-fit decreasing (`training.packing`),
rows as long as the longest example rounded up to 8 tokens, run through the model's packed
counterpart (attention kept within each example, positions restarting:
`packed_encoder.build_packed_classifier` reads each example's `[CLS]` at its place,
`build_packed_embedder` pools each text over its own tokens), and each example's output put
back in the order of `x`: the same values as unpacked, within float32 rounding.

Every batch has one static shape for XLA (`[rows, row_length]` tokens, `[rows, slots]`
`[CLS]` places; the last batch filled up with empty rows where a new shape would compile a
program), as many rows as hold `batch_size` examples on average (under XLA rounded up to a
power of two, so that a streamed file's windows compile few programs). On TensorFlow on CPU it runs
one TensorFlow graph (`bucketed_prediction.predicts_as_graph`), elsewhere the model's own
compiled prediction.

>>> logits = kbz.training.packed_prediction.predict(classifier, x, batch_size=64)
"""

import functools
import weakref

import keras
import numpy as np

from keras_bert_zoo.packed_encoder import build_packed_classifier, build_packed_embedder
from keras_bert_zoo.training import bucketed_prediction
from keras_bert_zoo.training.batching import real_lengths, run_in_batches
from keras_bert_zoo.training.packed_batches import packed_batch
from keras_bert_zoo.training.packing import pack_rows
from keras_bert_zoo.training.processes import is_chief, process_count
from keras_bert_zoo.training.progress import rows_counter

AUTO = "auto"
# "auto" packs where buckets would compute this many times the packed token positions: SST-2's
# sentences (1.29x) ran 7-10% faster packed, the SQuAD corpus of questions and paragraphs
# (1.13x, rows of 256 tokens: longer attention for its questions) no faster
# (benchmarks/RESULTS.md, "Sequence packing").
MIN_SAVING = 1.2

_PACKED = weakref.WeakKeyDictionary()  # model -> its packed model
# a layer of the model -> the builder of its packed counterpart (a reranker's pairs are read
# at their `[CLS]` as a classifier's sentences)
_BUILDERS = {
    "classifier_head": build_packed_classifier,
    "reranker_head": functools.partial(build_packed_classifier, head="reranker_head"),
    "sentence_pooling": build_packed_embedder,
}


def can_pack(model) -> bool:
    """True for a Keras classifier, reranker or embedder (`kbz.build_classifier`,
    `kbz.build_reranker`, `kbz.build_embedder`, their task models) of one process; not for a
    `runtimes` runner (ONNX Runtime, OpenVINO), which runs buckets."""
    if not isinstance(model, keras.Model) or process_count() > 1:
        return False
    return any(layer.name in _BUILDERS for layer in model.layers)


def check_packing(packing, packable: bool):
    """`packing` as True, False or "auto" (None: "auto"); an error naming the flag for
    another value, or for True where the model cannot pack (not `packable`)."""
    packing = AUTO if packing is None else packing
    if not (isinstance(packing, bool) or packing == AUTO):
        raise ValueError(
            f"`packing` (--packing) must be True, False or 'auto'. Received: packing={packing!r}."
        )
    if packing is True and not packable:
        raise ValueError(
            "packing=True (--packing) predicts packed rows with a Keras classifier, reranker or "
            "embedder in one process; this model runs on buckets (another task, a --runtime "
            "other than keras, or several processes). Pass packing=False (--no-packing), or "
            "leave it out (auto)."
        )
    return packing


def predict_outputs(
    model, x, batch_size, sequence_outputs, progress=None, packing=AUTO, label="predict",
    bucketing=True,
):  # fmt: skip
    """`model`'s outputs for tokenized `x`: packed rows (`predict`) where `can_pack` and
    `packing` is True, or "auto" and packing saves positions (`saves_positions`); else length
    buckets (`bucketed_prediction.predict`; `label` names the progress), those of
    `bucketed_prediction.prediction_buckets` for `x`'s length, or with `bucketing` False the
    full length alone."""
    width = np.shape(x["token_ids"])[-1]
    buckets = bucketed_prediction.prediction_buckets(model, width) if bucketing else [width]
    packable = can_pack(model)
    packing = check_packing(packing, packable)
    one_per_row = np.ndim(x["token_ids"]) == 2  # not query groups (`[examples, group, length]`)
    packs = packable and one_per_row and not sequence_outputs and packing is not False
    if packs and (packing is True or saves_positions(model, x, batch_size, buckets)):
        return predict(model, x, batch_size, progress=progress, label=label)
    return bucketed_prediction.predict(
        model, x, batch_size, buckets, sequence_outputs, progress, label
    )


def saves_positions(model, x, batch_size: int, buckets) -> bool:
    """True where length buckets would compute at least `MIN_SAVING` times the token
    positions of packed rows (the filler of whole batches under XLA counted on both sides)."""
    lengths = real_lengths(x)
    if not len(lengths):
        return False
    whole = not bucketed_prediction.predicts_any_shape(model)
    groups = bucketed_prediction.prediction_groups(lengths, batch_size, buckets)
    bucketed = sum(_filled(len(rows), batch_size, whole) * n for rows, n in groups)
    plan = _plan(model, lengths, batch_size, np.shape(x["token_ids"])[1])
    return bucketed >= MIN_SAVING * plan["size"] * plan["row_length"]


def predict(model, x: dict, batch_size: int, row_length=None, progress=None, label="predict"):
    """A classifier's `[examples, classes]` logits or an embedder's `[examples, hidden]`
    vectors for tokenized `x` (`token_ids`, `segment_ids`, `padding_mask`, real tokens
    first), computed on packed rows of `row_length` tokens (default: the longest example
    rounded up to 8, at most `x`'s width; under XLA up to its bucket,
    `bucketed_prediction.prediction_buckets`), `batch_size` examples per batch on average;
    in the order of `x`. `progress(examples)` after each batch, as
    `bucketed_prediction.predict` calls it."""
    lengths = real_lengths(x)
    count, width = len(lengths), np.shape(x["token_ids"])[1]
    if not count:
        return bucketed_prediction.predict(model, x, batch_size, [width], False, progress)
    progress = progress or rows_counter(label, count, enabled=is_chief())
    plan = _plan(model, lengths, batch_size, width, row_length)
    per_batch, size = plan["per_batch"], plan["size"]
    # the targets of `packed_batch` are then each place's example index, weighted 1 if used
    inputs, owner, used = packed_batch(
        x, np.arange(count), plan["rows"], plan["slots"], plan["row_length"], size
    )
    used = used > 0
    examples = used.sum(axis=1)
    batches = iter(range(0, size, per_batch))

    def batch_done(_rows: int) -> None:
        begin = next(batches)
        progress(int(examples[begin : begin + per_batch].sum()))

    logits = bucketed_prediction.host(_forward(model)(inputs, per_batch, batch_done))
    out = np.zeros((count, *logits.shape[2:]), logits.dtype)
    out[owner[used]] = logits[used]
    return out


def _plan(model, lengths, batch_size: int, width: int, row_length=None) -> dict:
    """The packed rows of `lengths`: `rows` (example indices), `row_length`, `per_batch`
    rows a batch, `slots` example places a row, `size` rows in all (with filler)."""
    # Under XLA one shape per call: the last batch filled up with empty rows (all padding,
    # no example); and few shapes over calls (a streamed file's windows): rows of a bucket's
    # length, rows per batch and example places rounded up to powers of two.
    whole = not bucketed_prediction.predicts_any_shape(model)
    longest = int(lengths.max())
    if whole:
        buckets = bucketed_prediction.prediction_buckets(model, width)
        default = next(n for n in buckets if n >= longest)
    else:
        default = min(width, -(-longest // 8) * 8)
    row_length = row_length or default
    rows = pack_rows(lengths, row_length)
    per_batch = max(1, round(len(rows) * batch_size / len(lengths)))
    slots = max(len(row) for row in rows)
    if whole:
        per_batch, slots = _power_of_two(per_batch), _power_of_two(slots)
    size = _filled(len(rows), per_batch, whole)
    return dict(rows=rows, row_length=row_length, per_batch=per_batch, slots=slots, size=size)


def _filled(rows: int, batch_size: int, whole: bool) -> int:
    """Rows computed: under XLA (`whole`) whole batches only."""
    return -(-rows // batch_size) * batch_size if whole else rows


def _power_of_two(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def _forward(model):
    """`run(inputs, batch_size, batch_done)` of `model`'s packed counterpart, built once per
    model (it shares the model's layers, so trained weights show)."""
    if model not in _PACKED:
        build = next(_BUILDERS[layer.name] for layer in model.layers if layer.name in _BUILDERS)
        packed = build(model)
        if model.compiled:
            packed.compile(jit_compile=model.jit_compile)
        _PACKED[model] = packed
    packed = _PACKED[model]
    if bucketed_prediction.predicts_as_graph(model):
        return bucketed_prediction.graph_forward(packed)
    return lambda inputs, size, done: run_in_batches(packed.predict_on_batch, inputs, size, done)
