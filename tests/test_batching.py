"""Length bucketing (`kbz.training.batching`): the seeded batch schedule, trimmed training
batches and trimmed prediction give the results of full padding for real tokens, on a tiny
random BERT and the bundled real data samples (SST-2, WNUT-17, SQuAD v1.1)."""

import functools
import itertools
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import record_predict_shapes, save_tiny_preset
from hypothesis import given, settings
from hypothesis import strategies as st

import keras_bert_zoo as kbz
from keras_bert_zoo.tasks.models import FINETUNING_TASKS
from keras_bert_zoo.training import batching, bucket_choice, bucketed_prediction

DATA = Path(__file__).parent / "data" / "finetune"
EXAMPLES = Path(__file__).parents[1] / "examples" / "data"
TRAIN = {
    "classifier": DATA / "sst2_train_head.tsv",
    "tagger": DATA / "wnut17_train_head.conll",
    "question_answerer": DATA / "squad_v1.1_sample.json",
}
LENGTH = {"classifier": 64, "tagger": 64, "question_answerer": 128}


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    """A 1-layer random BERT without dropout on the real uncased vocabulary."""
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset", dropout=0.0)


@functools.cache
def _read(preset, task):
    """A task's job, examples and arrays, read once per module: the tests only read them."""
    preprocessor = kbz.BertPreprocessor.from_preset(preset, sequence_length=LENGTH[task])
    job = FINETUNING_TASKS[task](preprocessor)
    dataset = job.read(TRAIN[task])
    return job, dataset, job.arrays(dataset)


def _task_data(preset, task):
    job, dataset, (x, y, extra) = _read(preset, task)
    head = {"dropout": 0.0} if task != "question_answerer" else {}
    keras.utils.set_random_seed(1)
    model = kbz.from_preset(preset, task=task, **job.task_kwargs(dataset), **head)
    return job, dataset, model, (x, y, extra)


def test_bucket_lengths_end_at_the_sequence_length():
    assert batching.bucket_lengths(128) == [16, 32, 64, 128]
    assert batching.bucket_lengths(100) == [16, 32, 64, 100]
    assert batching.bucket_lengths(16) == [16]
    assert batching.bucket_lengths(384, bucketing=False) == [384]
    np.testing.assert_array_equal(
        batching.bucket_ids([1, 16, 17, 33, 64, 65, 128], [16, 32, 64, 128]), [0, 0, 1, 2, 2, 3, 3]
    )


def _epoch_cost(lengths, buckets, batch_size, epochs):
    """The time `training_buckets` minimises, in tokens, written out independently."""
    lengths, total, used = np.asarray(lengths), 0, 0
    for low, high in zip([0, *buckets[:-1]], buckets, strict=True):
        examples = int(((lengths > low) & (lengths <= high)).sum())
        if examples:
            steps = -(-examples // batch_size)
            total += epochs * steps * (bucket_choice.STEP_OVERHEAD + batch_size * high)
            used += 1
    return total + used * bucket_choice.COMPILE_COST


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(2, 48), min_size=1, max_size=3000),
    batch_size=st.sampled_from([1, 8, 32]),
    sequence_length=st.sampled_from([16, 40, 48]),
    epochs=st.integers(1, 5),
)
def test_training_buckets_are_the_cheapest_set_of_lengths(
    lengths, batch_size, sequence_length, epochs
):
    lengths = [min(n, sequence_length) for n in lengths]
    chosen = bucket_choice.training_buckets(lengths, batch_size, sequence_length, epochs)
    candidates = [*range(8, sequence_length, 8), sequence_length]
    assert chosen[-1] == sequence_length and chosen == sorted(set(chosen))
    assert set(chosen) <= set(candidates)
    cheapest = min(  # every subset of the candidates that ends at the sequence length
        _epoch_cost(lengths, [*subset, sequence_length], batch_size, epochs)
        for size in range(len(candidates))
        for subset in itertools.combinations(candidates[:-1], size)
    )
    assert _epoch_cost(lengths, chosen, batch_size, epochs) == cheapest


def test_training_buckets_keep_a_whole_batch():
    # 65 short and 65 long rows, batches of 128: two lengths would be cheaper (one step of
    # each instead of two long steps), but neither would hold a whole batch
    lengths = [8] * 65 + [512] * 65
    assert _epoch_cost(lengths, [8, 512], 128, 1) < _epoch_cost(lengths, [512], 128, 1)
    assert bucket_choice.training_buckets(lengths, 128, 512) == [512]
    assert batching.BatchSchedule(lengths, 128, [512], 0).steps_per_epoch == 1


def test_training_buckets_on_sst2_beat_powers_of_two(tiny_preset):
    """On the bundled 3,000 SST-2 sentences and on a 20x longer run of them."""
    preprocessor = kbz.BertPreprocessor.from_preset(tiny_preset, sequence_length=128)
    job = FINETUNING_TASKS["classifier"](preprocessor)
    x, _, _ = job.arrays(job.read(EXAMPLES / "sst2_sample.tsv"))
    lengths = batching.real_lengths(x)
    powers = batching.bucket_lengths(128)
    for epochs in (1, 20):
        chosen = bucket_choice.training_buckets(lengths, 32, 128, epochs)
        ours, theirs = (_epoch_cost(lengths, b, 32, epochs) for b in (chosen, powers))
        assert ours < theirs, (epochs, chosen)
        assert batching.BatchSchedule(lengths, 32, chosen, 0).steps_per_epoch >= 90
    assert bucket_choice.training_buckets(lengths, 32, 128, 1, bucketing=False) == [128]


def _schedule(seed=0, batch_size=8, count=203):
    lengths = np.random.default_rng(7).integers(3, 129, count)
    return lengths, batching.BatchSchedule(lengths, batch_size, [16, 32, 64, 128], seed)


def test_the_schedule_is_reproducible_and_covers_each_example_at_most_once_per_epoch():
    lengths, schedule = _schedule()
    counts = np.bincount(batching.bucket_ids(lengths, [16, 32, 64, 128]), minlength=4)
    assert schedule.steps_per_epoch == sum(counts // 8) > 0
    for epoch in range(3):
        indices, trimmed = schedule.epoch(epoch)
        assert indices.shape == (schedule.steps_per_epoch, 8)
        assert len(np.unique(indices)) == indices.size  # no example twice in one epoch
        assert len(np.unique(indices)) >= len(lengths) - 4 * 7  # at most 7 left per bucket
        for batch, length in zip(indices, trimmed, strict=True):
            assert lengths[batch].max() <= length  # real tokens all kept
            assert length == 16 or lengths[batch].min() > length // 2  # one bucket per batch
    first, second = _schedule()[1], _schedule()[1]
    np.testing.assert_array_equal(first.batches(0, 100)[0], second.batches(0, 100)[0])
    other = _schedule(seed=1)[1]
    assert not np.array_equal(first.epoch(0)[0], other.epoch(0)[0])
    assert not np.array_equal(first.epoch(0)[0], first.epoch(1)[0])  # reshuffled each epoch
    assert len({tuple(first.epoch(0)[1]), tuple(first.epoch(1)[1])}) == 2  # batch order too


def test_consecutive_steps_mix_the_length_buckets():
    # Not one bucket after another: each epoch's batches are shuffled across buckets, so
    # the optimizer sees short and long sentences interleaved (as unbucketed shuffling would).
    _, schedule = _schedule()
    for epoch in range(3):
        trimmed = schedule.epoch(epoch)[1]
        changes = int((trimmed[1:] != trimmed[:-1]).sum())
        assert changes >= len(trimmed) // 2, trimmed  # grouped by bucket would give 3
        assert len(set(trimmed[: len(trimmed) // 4])) >= 3, trimmed


def test_a_stream_started_at_a_step_is_the_tail_of_the_full_stream():
    lengths, schedule = _schedule(batch_size=4, count=60)
    x = {
        "token_ids": np.arange(60 * 128).reshape(60, 128),
        "padding_mask": (np.arange(128) < lengths[:, None]).astype(np.int32),
    }
    y = np.arange(60)
    stream = batching.training_stream(x, y, schedule, sequence_targets=False)
    full = list(stream(0).take(40).as_numpy_iterator())
    start = schedule.steps_per_epoch + 3  # inside the second epoch
    tail = list(stream(start).take(40 - start).as_numpy_iterator())
    for (x_full, y_full), (x_tail, y_tail) in zip(full[start:], tail, strict=True):
        np.testing.assert_array_equal(y_tail, y_full)
        for key in x:
            np.testing.assert_array_equal(x_tail[key], x_full[key])
    widths = {batch[0]["token_ids"].shape[1] for batch in full}
    assert widths == {16, 32, 64, 128} and all(b[0]["token_ids"].shape[0] == 4 for b in full)
    for inputs, labels in full:  # each row is its example, trimmed
        np.testing.assert_array_equal(
            inputs["token_ids"], x["token_ids"][labels, : len(inputs["token_ids"][0])]
        )
    fixed = batching.BatchSchedule(lengths, 4, batching.bucket_lengths(128, False), 0)
    stream = batching.training_stream(x, y, fixed, sequence_targets=False)
    shapes = {b[0]["token_ids"].shape for b in stream(0).take(30).as_numpy_iterator()}
    assert shapes == {(4, 128)} and fixed.steps_per_epoch == 15  # --no-bucketing: as before


@given(sequence_length=st.integers(1, 1024))
def test_cpu_bucket_lengths_pad_a_batch_by_less_than_a_step(sequence_length):
    buckets = bucketed_prediction.cpu_bucket_lengths(sequence_length)
    assert buckets == sorted(set(buckets)) and buckets[-1] == sequence_length
    assert buckets[0] == min(batching.SMALLEST_BUCKET, sequence_length)
    step = 32 * -(-sequence_length // 256)  # 32 tokens per 256
    assert all(b - a < 1.5 * step for a, b in zip(buckets, buckets[1:], strict=False))
    assert len(buckets) <= 11  # a compile each: a few more than powers of two, never dozens


def test_cpu_bucket_lengths_of_common_lengths():
    assert bucketed_prediction.cpu_bucket_lengths(128) == [16, 32, 64, 96, 128]
    assert bucketed_prediction.cpu_bucket_lengths(256) == [16, 32, 64, 96, 128, 160, 192, 224, 256]
    assert bucketed_prediction.cpu_bucket_lengths(512) == [
        16,
        32,
        64,
        128,
        192,
        256,
        320,
        384,
        448,
        512,
    ]
    assert bucketed_prediction.cpu_bucket_lengths(24) == [16, 24]
    assert bucketed_prediction.cpu_bucket_lengths(521) == [16, 32, 64, 96, 192, 288, 384, 521]


@given(
    lengths=st.lists(st.integers(1, 64), min_size=1, max_size=60),
    batch_size=st.integers(1, 9),
)
def test_prediction_groups_cover_every_example_once_with_the_partial_batch_shortest(
    lengths, batch_size
):
    buckets = batching.bucket_lengths(64)
    groups = bucketed_prediction.prediction_groups(np.array(lengths), batch_size, buckets)
    rows = np.concatenate([group for group, _ in groups])
    assert sorted(rows.tolist()) == list(range(len(lengths)))
    assert [length for _, length in groups] == sorted({length for _, length in groups})
    for position, (group, length) in enumerate(groups):
        assert max(lengths[i] for i in group) <= length  # every example fits its bucket
        if position:  # only the first, shortest group may end in a partial batch
            assert len(group) % batch_size == 0
    # Cut from the longest end: the partial batch, filled up under XLA, is the shortest.
    assert len(groups[0][0]) % batch_size == len(lengths) % batch_size


@pytest.mark.parametrize("graph", [True, False], ids=["one graph (TF CPU)", "Keras predict"])
@pytest.mark.parametrize("task", ["classifier", "tagger", "question_answerer"])
def test_bucketed_prediction_equals_full_padding_for_real_tokens(
    tiny_preset, task, graph, monkeypatch
):
    job, dataset, model, (x, _, extra) = _task_data(tiny_preset, task)
    buckets = batching.bucket_lengths(LENGTH[task])
    lengths = batching.real_lengths(x)
    assert len(np.unique(batching.bucket_ids(lengths, buckets))) > 1  # several buckets used
    full = model.predict(x, batch_size=8, verbose=0)
    assert bucketed_prediction.predicts_as_graph(model)  # TensorFlow on CPU
    if not graph:  # as on a GPU or TPU: Keras' `predict`, one (XLA) program per bucket
        monkeypatch.setattr(bucketed_prediction, "predicts_as_graph", lambda model: False)
    shapes, _ = record_predict_shapes(model, monkeypatch)
    graph_rows, graph_forward = [], bucketed_prediction.graph_forward

    def counting(model):  # the rows each graph call runs
        run = graph_forward(model)
        return lambda inputs, batch_size, *done: (
            graph_rows.append(len(inputs["token_ids"])) or run(inputs, batch_size, *done)
        )

    monkeypatch.setattr(bucketed_prediction, "graph_forward", counting)
    bucketed = bucketed_prediction.predict(model, x, 9, buckets, job.sequence_outputs)
    if graph:  # one graph traced once serves every bucket length
        assert (
            not shapes and bucketed_prediction._GRAPHS[model].experimental_get_tracing_count() == 1
        )
        assert sum(graph_rows) == len(x["token_ids"])  # no filler rows for the graph
        assert len(graph_rows) > 1
    else:  # whole batches only (the partial one filled up): one batch shape per bucket
        assert len(x["token_ids"]) % 9 and all(rows % 9 == 0 for rows, _ in shapes), shapes
        assert len({width for _, width in shapes}) == len(shapes) > 1
    mask = np.asarray(x["padding_mask"]).astype(bool)
    for ours, reference in zip(keras.tree.flatten(bucketed), keras.tree.flatten(full), strict=True):
        assert ours.shape == reference.shape
        if job.sequence_outputs:
            np.testing.assert_allclose(ours[mask], reference[mask], atol=1e-5)
            trimmed = ours == np.finfo(ours.dtype).min  # cut off with the bucket
            assert trimmed.any() and not trimmed[mask].any()
            np.testing.assert_allclose(ours[~trimmed], reference[~trimmed], atol=1e-5)
        else:
            np.testing.assert_allclose(ours, reference, atol=1e-5)
    predicted = job.predict(dataset, bucketed, extra)
    expected = job.predict(dataset, full, extra)
    if task == "classifier":
        np.testing.assert_allclose(predicted, expected, atol=1e-6)
    elif task == "tagger":
        assert predicted == expected
    else:
        assert predicted["answers"] == expected["answers"]


@pytest.mark.parametrize("task", ["classifier", "tagger", "question_answerer"])
def test_one_bucketed_training_step_equals_a_full_length_step(tiny_preset, task):
    job, dataset, model, (x, y, _) = _task_data(tiny_preset, task)
    lengths = batching.real_lengths(x)
    schedule = batching.BatchSchedule(lengths, 4, batching.bucket_lengths(LENGTH[task]), 0)
    stream = batching.training_stream(x, y, schedule, job.sequence_outputs)
    step = next(s for s in range(100) if schedule.batch(s)[1] < LENGTH[task])  # a trimmed batch
    indices, length = schedule.batch(step)
    trimmed_x, trimmed_y = next(stream(step).as_numpy_iterator())
    assert trimmed_x["token_ids"].shape == (4, length)
    full_x = {key: value[indices] for key, value in x.items()}
    full_y = keras.tree.map_structure(lambda t: np.asarray(t)[indices], y)
    start = [w.numpy() for w in model.weights]
    results = []
    for inputs, targets in ((trimmed_x, trimmed_y), (full_x, full_y)):
        for weight, value in zip(model.weights, start, strict=True):
            weight.assign(value)
        # graph mode: the trimmed step's arithmetic is the point, not XLA's (two compiles)
        model.compile(
            optimizer=keras.optimizers.SGD(0.5), loss=job.loss(dataset), jit_compile=False
        )
        loss = model.train_on_batch(inputs, targets)
        results.append((loss, [w.numpy() for w in model.weights]))
    (loss_trimmed, trimmed), (loss_full, full) = results
    assert loss_trimmed == pytest.approx(loss_full, rel=1e-5)
    changed = 0
    for ours, reference, before in zip(trimmed, full, start, strict=True):
        np.testing.assert_allclose(ours, reference, atol=1e-5)
        changed += not np.allclose(reference, before)
    assert changed > 5  # the step did train


@pytest.mark.e2e
def test_bucketed_batches_train_alike_on_two_mirrored_replicas(tiny_preset, mirrored_strategy):
    """The stream's batches of varying length under `MirroredStrategy` (the two logical CPUs
    of conftest, XLA per replica) end with the weights of one device."""
    preprocessor = kbz.BertPreprocessor.from_preset(tiny_preset, sequence_length=64)
    job = FINETUNING_TASKS["classifier"](preprocessor)
    dataset = job.read(TRAIN["classifier"])
    x, y, _ = job.arrays(dataset)
    schedule = batching.BatchSchedule(batching.real_lengths(x), 8, [16, 32, 64], seed=0)
    stream = batching.training_stream(x, y, schedule, sequence_targets=False)
    assert len(set(schedule.batches(0, 4)[1].tolist())) > 1  # shapes vary within the run
    weights = []
    for strategy in (tf.distribute.get_strategy(), mirrored_strategy):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            model = kbz.from_preset(tiny_preset, task="classifier", num_classes=2, dropout=0.0)
            model.compile(optimizer=keras.optimizers.SGD(0.5), loss=job.loss(dataset))
        start = [np.asarray(w.numpy()) for w in model.weights]
        kbz.training.StrategyTrainer(model, strategy, jit_compile=True).fit(
            stream(0), epochs=1, steps_per_epoch=4, verbose=0
        )
        weights.append([np.asarray(w.numpy()) for w in model.weights])
    changed = 0
    for mirrored, single, before in zip(weights[1], weights[0], start, strict=True):
        np.testing.assert_allclose(mirrored, single, atol=1e-5)
        changed += not np.allclose(single, before)
    assert changed > 5  # it did train


def test_bucketed_prediction_of_a_mixed_bfloat16_model_is_float32(tiny_preset):
    # np.finfo knows no bfloat16: trimmed positions could not be padded with the lowest float
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        job, _, model, (x, _, _) = _task_data(tiny_preset, "question_answerer")
        buckets = batching.bucket_lengths(LENGTH["question_answerer"])
        bucketed = bucketed_prediction.predict(model, x, 9, buckets, job.sequence_outputs)
        full = model.predict(x, batch_size=8, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    mask = np.asarray(x["padding_mask"]).astype(bool)
    flat = keras.tree.flatten(full)
    assert {np.asarray(f).dtype.name for f in flat} == {"bfloat16"}
    for ours, reference in zip(keras.tree.flatten(bucketed), flat, strict=True):
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours[mask], np.asarray(reference, np.float32)[mask], atol=0.1)
