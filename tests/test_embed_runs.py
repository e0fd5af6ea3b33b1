"""`kbz finetune embed` through the engine of every task (issue 29): exact resume, the kept
epoch (best validation MRR or the last), the batches it trains on, mixed precision.

Pairs are SST-2 sentences split in halves (query: the first half, positive: the second), so
their lengths vary and the batches are trimmed to several buckets."""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import Kill, powers_of_two_buckets, save_tiny_preset
from safetensors.numpy import load_file

from keras_bert_zoo.cli import main
from keras_bert_zoo.jobs import finetune as runs
from keras_bert_zoo.jobs.embed import embed_texts, load_embedder, recall_at_k
from keras_bert_zoo.training.distinct_batches import DistinctBatchSchedule

DATA = Path(__file__).parent / "data" / "finetune"


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:]
    words = [line.rsplit("\t", 1)[0].split() for line in lines]
    halves = [(" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2 :])) for w in words]
    halves = list(dict(h for h in halves if len(h[0].split()) > 2).items())[:64]
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    path.write_text("query\tpositive\n" + "".join(f"{q}\t{p}\n" for q, p in halves))
    return path, halves


def _finetune(preset, pairs, output, *flags):
    path, _ = pairs
    command = ["finetune", "embed", "--preset", str(preset), "--train", str(path)]
    command += ["--validation", str(path), "--output", str(output), "--batch-size", "8"]
    command += ["--sequence-length", "32", "--learning-rate", "2e-3", "--no-export"]
    assert main([*command, "--no-jit-compile", *flags]) == 0
    return json.loads((output / "metrics.json").read_text())


def _weights(output):
    return load_file(output / "preset" / "model.weights.safetensors")


def test_the_schedule_draws_distinct_batches_anew_each_epoch_trimmed_to_their_longest():
    texts = [(f"q{i}", f"p{i % 6}") for i in range(60)]  # 10 queries per positive
    lengths = np.arange(60) % 30 + 3
    schedule = DistinctBatchSchedule(texts, lengths, 6, seed=1, epochs=2, sequence_length=32)
    assert schedule.steps_per_epoch >= 8
    first, second = schedule.epoch(0)[0], schedule.epoch(1)[0]
    assert not np.array_equal(first, second)  # epoch 1 draws other batches
    for step in range(2 * schedule.steps_per_epoch):
        indices, length = schedule.batch(step)
        assert len({texts[i][1] for i in indices}) == 6  # no positive twice in a batch
        assert lengths[indices].max() <= length  # nothing cut
        smaller = schedule.buckets[schedule.buckets < length]
        assert not len(smaller) or lengths[indices].max() > smaller.max()  # the shortest
    again = DistinctBatchSchedule(texts, lengths, 6, seed=1, epochs=2, sequence_length=32)
    np.testing.assert_array_equal(again.epoch(1)[0], second)  # a pure function of the seed


@pytest.mark.e2e  # a kill, then the run again
def test_interrupted_finetune_embed_resumes_to_the_same_weights(
    tiny_preset, pairs, tmp_path, monkeypatch
):
    """Killed inside the second epoch after a checkpoint, then the same command: the
    weights, the history and the "before" retrieval equal an uninterrupted run's."""
    powers_of_two_buckets(monkeypatch)  # batches of 16 and 32 tokens in so small a run
    flags = ["--epochs", "2", "--checkpoint-every", "4"]
    straight = _finetune(tiny_preset, pairs, tmp_path / "straight", *flags)
    steps = straight["steps"]
    assert steps >= 12 and [e["epoch"] for e in straight["history"]] == list(
        range(1, -(-steps // 4) + 1)
    )
    monkeypatch.setattr(runs, "tensorboard", lambda output: Kill(step=6))
    path, _ = pairs
    command = ["finetune", "embed", "--preset", str(tiny_preset), "--train", str(path)]
    command += ["--validation", str(path), "--output", str(tmp_path / "interrupted")]
    command += ["--batch-size", "8", "--sequence-length", "32", "--learning-rate", "2e-3"]
    assert main([*command, "--no-export", "--no-jit-compile", *flags]) == 130  # Ctrl-C
    state = json.loads((tmp_path / "interrupted" / "checkpoints" / "state.json").read_text())
    assert state["checkpoints"][-1]["step"] == 4
    monkeypatch.undo()
    powers_of_two_buckets(monkeypatch)
    resumed = _finetune(tiny_preset, pairs, tmp_path / "interrupted", *flags)
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "interrupted")
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-6, err_msg=name)
    assert resumed["before"] == straight["before"]
    for x, y in zip(resumed["history"], straight["history"], strict=True):
        assert x == pytest.approx(y, abs=1e-6)


@pytest.mark.parametrize("keep", ["best", "last"])
def test_the_kept_epoch_is_the_best_mrr_or_the_last_and_its_weights_are_written(
    tiny_preset, pairs, tmp_path, keep
):
    output = tmp_path / keep
    metrics = _finetune(tiny_preset, pairs, output, "--epochs", "3", "--keep", keep)
    history = metrics["history"]
    assert [e["epoch"] for e in history] == [1, 2, 3]
    kept = max(history, key=lambda e: e["mrr"]) if keep == "best" else history[-1]
    assert metrics["kept_epoch"] == kept["epoch"]
    assert metrics["after"] == pytest.approx({k: v for k, v in kept.items() if k != "epoch"})
    assert metrics["after"]["mrr"] > metrics["before"]["mrr"]  # it trained
    # the written embedder is that epoch's: its retrieval of the pairs is the one recorded
    _, texts = pairs
    embedder, preprocessor = load_embedder(output)
    queries = embed_texts(embedder, preprocessor, [q for q, _ in texts])
    positives = sorted({p for _, p in texts})
    index = embed_texts(embedder, preprocessor, positives)
    targets = [positives.index(p) for _, p in texts]
    assert recall_at_k(queries, index, targets) == pytest.approx(metrics["after"], abs=1e-5)
    assert metrics["train_pairs"] == metrics["validation_pairs"] == len(texts)
    if keep == "best":  # a run directory as --preset goes on from its embedder
        again = _finetune(output, pairs, tmp_path / "again", "--epochs", "1")
        assert again["before"] == pytest.approx(metrics["after"], abs=1e-5)


def test_finetune_embed_in_mixed_precision_trains(tiny_preset, pairs, tmp_path):
    flags = ["--epochs", "1", "--mixed-precision", "mixed_bfloat16"]
    metrics = _finetune(tiny_preset, pairs, tmp_path / "bf16", *flags)
    assert all(np.isfinite(list(metrics["after"].values())))
    assert metrics["after"] != metrics["before"]
    assert keras.mixed_precision.global_policy().name == "float32"  # the caller's, back


@pytest.mark.e2e  # two mirrored replicas (the loss's semantics: test_distributed)
@pytest.mark.parametrize("packing", ["--no-packing", "--packing"])
def test_finetune_embed_on_two_mirrored_replicas_trains(tiny_preset, pairs, tmp_path, packing):
    flags = ["--epochs", "2", "--strategy", "mirrored", "--keep", "last", packing]
    metrics = _finetune(tiny_preset, pairs, tmp_path / "mirrored", *flags)
    if packing == "--no-packing":  # batches of 8 pairs, 4 a replica
        assert metrics["steps"] == 2 * (len(pairs[1]) // 8)
    else:  # rows of packed pairs, about 8 pairs a batch (`PackedSchedule`)
        assert abs(metrics["steps"] - 2 * (len(pairs[1]) // 8)) <= 2
    assert metrics["after"]["mrr"] > metrics["before"]["mrr"]
