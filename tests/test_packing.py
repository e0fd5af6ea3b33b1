# ruff: noqa: F811 (the imported `preset` fixture is a test argument)
"""Sequence packing: the packer's invariants and packed-vs-unpacked encoder parity (TensorFlow;
tests/test_backend_jax.py and tests/test_backend_torch.py run the parity on JAX and PyTorch)."""

import itertools
import types

import keras
import numpy as np
import pytest
from conftest import TINY
from hypothesis import given, settings
from hypothesis import strategies as st
from packed_parity import (
    check_packed_embedder_fit_step,
    check_packed_fit_step,
    check_packed_parity,
    check_packed_reranker_fit_step,
    check_packed_tagger_fit_step,
)
from packed_prediction_parity import check_packed_prediction
from task_model_scripts import DATA, preset, squad, sst2, wnut  # noqa: F401 (the `preset` fixture)

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.training import packed_batches
from keras_bert_zoo.training.packed_batches import PackedSchedule
from keras_bert_zoo.training.packing import pack, pack_rows, padding_fraction


@settings(max_examples=200, deadline=None)
@given(
    row_length=st.integers(1, 64),
    data=st.data(),
)
def test_every_example_placed_once_and_no_row_over_length(row_length, data):
    lengths = data.draw(st.lists(st.integers(1, row_length), max_size=60))
    rows = pack_rows(lengths, row_length)
    placed = sorted(i for row in rows for i in row)
    assert placed == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= row_length for row in rows)
    # best fit decreasing: no two rows could be merged into one
    loads = sorted(sum(lengths[i] for i in row) for row in rows)
    assert len(loads) < 2 or loads[0] + loads[1] > row_length


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=30))
def test_pack_keeps_each_example_tokens_segments_and_positions(lengths):
    rng = np.random.default_rng(len(lengths))
    mask = (np.arange(12)[None] < np.array(lengths)[:, None]).astype("int32")
    ids = rng.integers(1, 50, mask.shape) * mask
    segments = rng.integers(0, 2, mask.shape) * mask
    out = pack({"token_ids": ids, "segment_ids": segments, "padding_mask": mask}, 20)
    for i, n in enumerate(lengths):
        row, start = out["example_row"][i], out["example_start"][i]
        span = slice(start, start + n)
        np.testing.assert_array_equal(out["token_ids"][row, span], ids[i, :n])
        np.testing.assert_array_equal(out["segment_ids"][row, span], segments[i, :n])
        np.testing.assert_array_equal(out["position_ids"][row, span], np.arange(n))
        assert (out["sequence_ids"][row, span] == out["example_sequence"][i]).all()
        assert (out["sequence_ids"][row] == out["example_sequence"][i]).sum() == n
    np.testing.assert_array_equal(out["padding_mask"], out["sequence_ids"] > 0)
    assert out["padding_mask"].sum() == sum(lengths)


def test_padding_fraction_counts_rows_times_length_over_real_tokens():
    assert padding_fraction([3, 5, 2, 4], 8) == 16 / 14
    assert padding_fraction([3, 5, 2, 4], 8, packed=False) == 32 / 14


def test_an_example_longer_than_the_row_is_an_error_naming_the_fix():
    with pytest.raises(ValueError, match="row_length=4.*example 1 of length 5.*truncate"):
        pack_rows([3, 5], 4)


@pytest.mark.parametrize("attention", ["explicit", "fused"])
def test_packed_outputs_and_gradients_equal_unpacked(attention):
    check_packed_parity(attention, TINY)


@pytest.mark.parametrize(("num_classes", "empty_rows"), [(3, 0), (1, 0), (3, 3)])
def test_a_packed_fit_step_equals_the_unpacked_one(num_classes, empty_rows):
    check_packed_fit_step(TINY, num_classes, empty_rows)


@pytest.mark.parametrize("empty_rows", [0, 3])
def test_a_packed_tagger_fit_step_equals_the_unpacked_one(empty_rows):
    check_packed_tagger_fit_step(TINY, empty_rows)


@pytest.mark.parametrize(
    ("pooling", "empty_rows"), [("mean", 0), ("mean", 3), ("cls", 0), ("max", 0)]
)
def test_a_packed_embedder_fit_step_equals_the_unpacked_one(pooling, empty_rows):
    check_packed_embedder_fit_step(TINY, empty_rows, pooling)


@pytest.mark.parametrize(
    ("ranking_loss", "empty_rows"), list(itertools.product(["listwise", "pointwise"], [0, 2]))
)
def test_a_packed_reranker_fit_step_equals_the_unpacked_one(ranking_loss, empty_rows):
    check_packed_reranker_fit_step(TINY, ranking_loss, empty_rows)


def test_an_embedder_fits_on_packed_pairs_by_default(preset, caplog):
    x, _ = squad(16)
    queries, positives = x["question"], [c[: 40 + 9 * i] for i, c in enumerate(x["context"])]
    embedder = kbz.BertEmbedder.from_preset(preset, sequence_length=32)
    with caplog.at_level("INFO", logger="keras_bert_zoo"):
        history = embedder.fit(x=(queries, positives), batch_size=4, epochs=2, verbose=0)
    assert "Training on packed rows" in caplog.text
    fractions = history.history["padding_fraction"]
    assert len(fractions) == 2 and all(0 <= f < 0.35 for f in fractions), fractions
    assert all(np.isfinite(history.history["loss"]))


def test_the_packed_in_batch_loss_masks_another_pair_sharing_a_text():
    # Packed batches do not keep texts distinct: a positive shared by two pairs must not be
    # a negative of either, as if each pair's batch held the other pair without it.
    logits = np.random.default_rng(0).normal(size=(1, 3, 3)).astype("float32")
    ids = np.array([[[1, 4], [2, 4], [3, 5]]], "int32")  # pairs 0 and 1 share positive 4
    loss = kbz.tasks.in_batch_negatives_loss()
    got = keras.ops.convert_to_numpy(loss.call(ids, logits))[0]
    without = lambda i, j: keras.ops.log_softmax(logits[0, i, [i, j]])[0]  # noqa: E731
    np.testing.assert_allclose(got[:2], [-without(0, 2), -without(1, 2)], rtol=1e-6)
    np.testing.assert_allclose(got[2], -keras.ops.log_softmax(logits[0, 2])[2], rtol=1e-6)


def test_packed_fit_reports_each_epochs_padding(preset):
    texts, labels = sst2(48)
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    history = classifier.fit(texts, labels, batch_size=8, epochs=2, verbose=0, packing=True)
    fractions = history.history["padding_fraction"]
    assert len(fractions) == 2 and all(0 <= f < 0.1 for f in fractions), fractions
    assert all(np.isfinite(history.history["loss"]))


def test_a_tagger_fit_packs_by_default_and_reports_each_epochs_padding(preset, caplog):
    words, tags = wnut(24)
    names = kbz.data.tag_vocabulary(t for row in tags for t in row)
    tagger = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=64)
    with caplog.at_level("INFO", logger="keras_bert_zoo"):
        history = tagger.fit(words, tags, batch_size=4, epochs=2, verbose=0)
    assert "Training on packed rows" in caplog.text
    fractions = history.history["padding_fraction"]
    assert len(fractions) == 2 and all(0 <= f < 0.15 for f in fractions), fractions
    assert all(np.isfinite(history.history["loss"]))
    assert [len(t) for t in tagger.tag(words[:3])] == [len(w) for w in words[:3]]  # unpacked


@pytest.mark.parametrize(
    ("packing", "message"),
    [(True, r"packing=True packs.*the qa task does not pack.*packing=False"), ("yes", "'yes'")],
)
def test_packing_a_task_that_cannot_pack_stops_naming_the_flag(preset, packing, message):
    x, y = squad(8)
    qa = kbz.BertQuestionAnswerer.from_preset(preset, sequence_length=64, doc_stride=32)
    with pytest.raises(ValueError, match=message):
        qa.fit(x, y, batch_size=4, packing=packing)


@pytest.mark.parametrize("ranking_loss", ["listwise", "pointwise"])
def test_a_reranker_fits_on_packed_rows_when_asked_and_on_buckets_by_default(
    preset, caplog, ranking_loss
):
    x, _ = squad(16)
    queries, contexts = x["question"], x["context"]
    others = [contexts[(i + 4) % len(contexts)] for i in range(len(contexts))]
    passages = [p for pair in zip(contexts, others, strict=True) for p in pair]
    pairs = ([q for q in queries for _ in range(2)], passages)
    labels = [1, 0] * len(queries)
    reranker = kbz.BertReranker.from_preset(
        preset, sequence_length=64, ranking_loss=ranking_loss, num_negatives=1
    )
    with caplog.at_level("INFO", logger="keras_bert_zoo"):
        history = reranker.fit(pairs, labels, batch_size=4, epochs=2, verbose=0, packing=True)
    assert "Training on packed rows" in caplog.text
    fractions = history.history["padding_fraction"]
    assert len(fractions) == 2 and all(0 <= f < 0.35 for f in fractions), fractions
    assert all(np.isfinite(history.history["loss"]))
    assert reranker.score(pairs[0][:2], pairs[1][:2]).shape == (2,)  # the pair scorer, unpacked
    caplog.clear()
    with caplog.at_level("INFO", logger="keras_bert_zoo"):  # "auto": buckets (not faster)
        history = reranker.fit(pairs, labels, batch_size=4, epochs=1, verbose=0)
    assert "Training on packed rows" not in caplog.text
    assert "padding_fraction" not in history.history


def test_kbz_finetune_packing_for_a_task_that_cannot_pack_exits_2_naming_the_flag(tmp_path, capsys):
    train = str(DATA / "squad_v1.1_sample.json")
    flags = ["--preset", "bert_tiny_en_uncased", "--train", train, "--validation", train]
    status = main(["finetune", "qa", *flags, "--output", str(tmp_path / "out"), "--packing"])
    error = capsys.readouterr().err
    assert status == 2 and "--packing packs" in error and "--no-packing" in error, error
    assert "qa task does not pack" in error
    assert not (tmp_path / "out").exists()


def _examples(count: int, seed: int):
    """`(lengths, x, y)` of `count` random examples of 3 to 29 tokens padded to 32; each
    example's target is its index."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 30, count)
    mask = (np.arange(32)[None] < lengths[:, None]).astype("int32")
    x = {"token_ids": rng.integers(1, 99, mask.shape) * mask, "segment_ids": 0 * mask}
    x["padding_mask"] = mask
    return lengths, x, np.arange(count, dtype="int32")


def test_packed_batches_are_static_hold_each_example_once_and_resume_at_any_step():
    lengths, x, y = _examples(500, seed=0)
    schedule = PackedSchedule(lengths, 16, 32, seed=3)
    steps = schedule.steps_per_epoch
    assert abs(steps - 500 / 16) <= 500 / 16 * 0.15  # about `batch_size` examples a step
    stream = packed_batches.training_stream(x, y, schedule)
    batches = itertools.islice(stream(0), steps + 2)
    batches = [keras.tree.map_structure(np.asarray, batch) for batch in batches]
    seen = []
    for inputs, targets, weights in batches[:steps]:
        assert inputs["token_ids"].shape == (schedule.batch_size, 32)
        assert weights.shape == targets.shape == (schedule.batch_size, schedule.slots)
        seen += targets[weights > 0].tolist()
        assert inputs["padding_mask"].sum() == lengths[targets[weights > 0]].sum()
    assert len(seen) == len(set(seen)) > 0.9 * 500  # once each; a few left for the next epoch
    later = next(iter(stream(steps + 1)))  # a resumed run starts at any step: the same batch
    for got, want in zip(keras.tree.flatten(later), keras.tree.flatten(batches[-1]), strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_packed_query_groups_stay_whole_in_one_row_in_their_order():
    # The listwise loss needs each group's scores side by side: a group is the unit packed,
    # its pairs one after the other in one row (so in one batch), each read at its [CLS].
    from keras_bert_zoo.finetuning.task_training import training_schedule

    rng = np.random.default_rng(4)
    groups, size = 80, 4
    lengths = rng.integers(3, 30, (groups, size))
    mask = (np.arange(32) < lengths[..., None]).astype("int32")
    code = 1 + np.arange(groups * size).reshape(groups, size)  # pair j of group g
    ids = np.where(np.arange(32) == 0, code[..., None], rng.integers(1, 99, mask.shape)) * mask
    x = {"token_ids": ids, "segment_ids": 0 * mask, "padding_mask": mask}
    y = np.arange(groups, dtype="int32")  # each group's target: its index
    schedule = training_schedule(None, None, x, 4, 32, 1, True, True, seed=5)
    assert schedule.row_length <= 4 * 32 and schedule.slots == schedule.row_length // min(
        lengths.sum(-1)
    )
    seen = []
    for step in range(schedule.steps_per_epoch):
        inputs, targets, weights = packed_batches.packed_batch(
            x, y, schedule.batch(step), schedule.slots, schedule.row_length, schedule.batch_size
        )
        for row, place in zip(*np.nonzero(weights), strict=True):
            group = targets[row, place]
            starts = inputs["example_start"][row, place * size : (place + 1) * size]
            np.testing.assert_array_equal(inputs["token_ids"][row, starts], code[group])
            seen.append(group)
    assert len(seen) == len(set(seen)) > 0.8 * groups  # once each; a few left for the next epoch


def test_packed_batches_over_devices_hold_one_devices_examples_and_empty_rows():
    # A data-parallel run (`multiple`: its devices) must train on one device's batches: the
    # same examples in the same rows, filled up with empty rows that weigh nothing.
    lengths, x, y = _examples(300, seed=1)
    one, four = PackedSchedule(lengths, 16, 32, seed=3), PackedSchedule(lengths, 16, 32, 3, 4)
    assert one.steps_per_epoch == four.steps_per_epoch
    assert four.batch_size % 4 == 0 and four.batch_size > one.batch_size  # rows filled up
    streams = [packed_batches.training_stream(x, y, s)(0) for s in (one, four)]
    for a, b in itertools.islice(zip(*streams, strict=True), one.steps_per_epoch + 1):
        a, b = keras.tree.map_structure(np.asarray, (a, b))
        rows = one.batch_size
        for got, want in zip(keras.tree.flatten(b), keras.tree.flatten(a), strict=True):
            np.testing.assert_array_equal(got[:rows], want)
            assert not got[rows:].any()  # empty rows: no token, no example, weight 0


def test_the_packing_report_names_the_datas_epoch_after_a_resume():
    # A resumed run's fit starts at the restored optimizer's step: the epoch it reports is
    # the one its batches come from, not the fit's own count from 0.
    lengths = np.random.default_rng(2).integers(3, 30, 400)
    schedule = PackedSchedule(lengths, 16, 32, seed=0)
    steps = schedule.steps_per_epoch
    fractions = {e: 1 - schedule.tokens_per_position(e) for e in (0, 1)}
    assert fractions[0] != fractions[1]  # the two epochs' packings differ
    for before, epoch in ((0, 0), (steps, 1)):
        optimizer = keras.optimizers.SGD()
        optimizer.iterations.assign(before)
        report = packed_batches.PackingReport(schedule)
        report.set_model(types.SimpleNamespace(optimizer=optimizer))
        report.on_train_begin()
        logs = {}
        for batch in range(steps):
            report.on_train_batch_end(batch)
        report.on_epoch_end(0, logs)
        assert logs["padding_fraction"] == fractions[epoch]


@pytest.mark.parametrize("head", [3, 1, "reranker", "mean", "cls", "max"])
def test_packed_prediction_equals_bucketed_in_the_order_given(head):
    check_packed_prediction(TINY, head, jit_compile=True)


def test_auto_packs_prediction_where_it_saves_positions():
    from keras_bert_zoo.training import bucketed_prediction, packed_prediction

    model = kbz.build_classifier(kbz.build_encoder(**TINY), num_classes=2)
    buckets = bucketed_prediction.prediction_buckets(model, 64)

    def inputs(lengths):
        mask = (np.arange(64)[None] < np.array(lengths)[:, None]).astype("int32")
        return {"token_ids": 5 * mask, "segment_ids": 0 * mask, "padding_mask": mask}

    # one bucket of 64 for 4 short and 1 long example: packed rows of 64 hold the 4 together
    assert packed_prediction.saves_positions(model, inputs([60, 9, 9, 9, 9]), 8, buckets)
    # equal lengths: a bucket fits them as tightly as packed rows do
    assert not packed_prediction.saves_positions(model, inputs([32] * 8), 8, buckets)
