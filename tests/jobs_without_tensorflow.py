"""The `kbz` jobs with TensorFlow's import blocked (issue 28): the checks that
tests/test_backend_jax_notf.py and tests/test_backend_torch_notf.py run on their backend.

Each fine-tunes a 1-layer random BERT on the bundled real samples for a few steps, then runs
`kbz predict` on the run and checks it gives the run's own validation predictions; `kbz
pretrain --text-file` pretrains one from scratch on masked text, and resumes exactly. JAX
compiles (eager JAX compiles every op on its own, slower than one program per bucket);
PyTorch runs eagerly (`--no-jit-compile`: its jit is torch.compile, minutes per shape).
"""

import json
import sys
from pathlib import Path
from unittest import mock

import keras
import numpy as np
import pytest
from conftest import Kill, save_tiny_preset
from safetensors.numpy import load_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.extras import MissingExtraError, tensorflow_installed
from keras_bert_zoo.jobs import finetune as finetune_job
from keras_bert_zoo.jobs import pretrain as pretrain_job
from keras_bert_zoo.jobs.embed import load_embedder
from keras_bert_zoo.training import batching
from keras_bert_zoo.training.resume import fit_resumable

DATA = Path(__file__).parent / "data" / "finetune"
SENTENCES = Path(__file__).parent / "data" / "pretraining" / "sentences.txt"
JIT = [] if keras.backend.backend() == "jax" else ["--no-jit-compile"]
FAST = ["--epochs", "1", "--no-export", "--learning-rate", "1e-3", *JIT]


def check_tensorflow_is_blocked():
    assert keras.backend.backend() in ("jax", "torch")
    assert not tensorflow_installed()  # conftest's blocker: a stray import fails the test


def tiny_preset(directory):
    return save_tiny_preset(directory, num_layers=1, max_sequence_length=64)


def _changed(preset, run) -> bool:
    before = kbz.encoder.find_encoder(kbz.from_preset(preset)).weights[0]
    after = kbz.encoder.find_encoder(kbz.load_model(run / "model.keras")).weights[0]
    return not np.allclose(keras.ops.convert_to_numpy(before), keras.ops.convert_to_numpy(after))


def finetune_and_predict(tmp_path, task, train, validation, length, *options):
    """`kbz finetune TASK` then `kbz predict TASK` on its validation file: returns the run's
    validation predictions file and `kbz predict`'s, with the run's metrics."""
    preset, run = tiny_preset(tmp_path / "tiny"), tmp_path / "run"
    argv = ["finetune", task, "--preset", str(preset), "--train", str(train)]
    argv += ["--validation", str(validation), "--output", str(run), "--batch-size", "8"]
    assert main([*argv, "--sequence-length", str(length), *FAST, *options]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert len(metrics["history"]) == 1 and _changed(preset, run)  # it trained one epoch
    written = sorted(p for p in run.iterdir() if p.name.startswith("predictions"))
    assert len(written) == 1, written
    predicted = tmp_path / written[0].name
    argv = ["predict", task, "--model", str(run), "--input", str(validation)]
    assert main([*argv, "--output", str(predicted), "--batch-size", "8", *JIT]) == 0
    return written[0], predicted, metrics


def check_classify(tmp_path):
    train = tmp_path / "train.tsv"  # 64 sentences: 8 steps of 8
    train.write_text("".join((DATA / "sst2_train_head.tsv").read_text().splitlines(True)[:65]))
    written, predicted, metrics = finetune_and_predict(tmp_path, "classify", train, train, 32)
    assert 0.0 <= metrics["accuracy"] <= 1.0
    run, again = (np.loadtxt(p, skiprows=1) for p in (written, predicted))
    assert run.shape == (64, 4)
    np.testing.assert_allclose(again, run, atol=2e-6)  # the 6 decimals written


def check_tag(tmp_path):
    train, validation = DATA / "wnut17_train_head.conll", DATA / "wnut17_dev_head.conll"
    written, predicted, metrics = finetune_and_predict(tmp_path, "tag", train, validation, 48)
    assert {"precision", "recall", "f1"} <= metrics.keys()
    lines = written.read_text().splitlines()
    assert len([line for line in lines if not line.strip()]) >= 59  # 60 sentences
    assert predicted.read_text().splitlines() == lines


def check_qa(tmp_path):
    sample = json.loads((DATA / "squad_v1.1_sample.json").read_text())
    sample["data"][0]["paragraphs"] = sample["data"][0]["paragraphs"][:1]  # its questions
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps(sample))
    options = ["--max-query-length", "24", "--doc-stride", "32"]
    written, predicted, metrics = finetune_and_predict(tmp_path, "qa", squad, squad, 64, *options)
    assert {"exact_match", "f1"} <= metrics.keys()
    answers = json.loads(written.read_text())
    assert len(answers) == len(sample["data"][0]["paragraphs"][0]["qas"])
    assert json.loads(predicted.read_text()) == answers


def check_rerank(tmp_path):
    """Listwise training (query groups: `[rows, group, length]` batches) and `kbz predict`."""
    rerank = Path(__file__).parent / "fixtures" / "rerank"
    preset, run = tiny_preset(tmp_path / "tiny"), tmp_path / "run"
    argv = ["finetune", "rerank", "--preset", str(preset), "--train", str(rerank / "train.tsv")]
    argv += ["--validation", str(rerank / "dev.tsv"), "--output", str(run), "--batch-size", "4"]
    argv += ["--num-negatives", "1", "--sequence-length", "64", *FAST]  # 10 groups of 2
    assert main(argv) == 0
    assert json.loads((run / "run.json").read_text())["settings"]["ranking_loss"] == "listwise"
    assert _changed(preset, run)
    predicted = tmp_path / "predictions.tsv"
    argv = ["predict", "rerank", "--model", str(run), "--input", str(rerank / "dev.tsv")]
    assert main([*argv, "--output", str(predicted), "--batch-size", "8", *JIT]) == 0
    written = (run / "predictions.tsv").read_text().splitlines()
    again = predicted.read_text().splitlines()
    assert [line.rsplit("\t", 1)[0] for line in again] == [
        line.rsplit("\t", 1)[0] for line in written
    ]
    scores = [[float(line.rsplit("\t", 1)[1]) for line in lines[1:]] for lines in (written, again)]
    np.testing.assert_allclose(scores[1], scores[0], atol=2e-6)  # the 6 decimals written


def check_embed(tmp_path):
    preset = tiny_preset(tmp_path / "tiny")
    lines = [line.rsplit("\t", 1)[0] for line in (DATA / "sst2_train_head.tsv").open()][1:41]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    argv = ["embed", "--model", str(preset), "--input", str(tmp_path / "in.txt")]
    argv += ["--output", str(tmp_path / "v.npy"), "--batch-size", "16", "--sequence-length", "32"]
    assert main(argv) == 0
    vectors = np.load(tmp_path / "v.npy")
    embedder, preprocessor = load_embedder(preset, sequence_length=32)
    expected = keras.ops.convert_to_numpy(embedder(preprocessor(lines)))  # one batch of all
    assert vectors.shape == (40, 32)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


# Dropout draws from its layers' seed state, which checkpoints hold, so it resumes too (on
# PyTorch through `kbz.layers.Dropout`'s own generator: Keras' draws from torch's global one).
DROPOUT = 0.2


def check_finetune_embed(tmp_path):
    """`kbz finetune embed` on (first half, second half) pairs of SST-2 sentences, then
    `kbz embed --model` of the run equals its embedder on one batch of all the texts."""
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:]
    words = [line.rsplit("\t", 1)[0].split() for line in lines]
    pairs = [(" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2 :])) for w in words if len(w) > 5]
    pairs = list(dict(pairs[:64]).items())  # distinct queries
    (tmp_path / "pairs.tsv").write_text("".join(f"{q}\t{p}\n" for q, p in pairs))
    preset, run = tiny_preset(tmp_path / "tiny"), tmp_path / "run"
    argv = ["finetune", "embed", "--preset", str(preset), "--train", str(tmp_path / "pairs.tsv")]
    argv += ["--validation", str(tmp_path / "pairs.tsv"), "--output", str(run)]
    assert main([*argv, "--batch-size", "8", "--sequence-length", "32", *FAST]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] >= 6 and metrics["after"] != metrics["before"]  # it trained
    texts = [q for q, _ in pairs]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    argv = ["embed", "--model", str(run), "--input", str(tmp_path / "in.txt")]
    assert main([*argv, "--output", str(tmp_path / "v.npy"), "--batch-size", "16"]) == 0
    embedder, preprocessor = load_embedder(run)  # the run's preset and sequence length
    expected = keras.ops.convert_to_numpy(embedder(preprocessor(texts)))
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), expected, atol=1e-5)


def check_finetune_embed_resumes(tmp_path):
    """`kbz finetune embed` killed after step 5 (its checkpoint: step 4) and run again ends
    with the weights of the uninterrupted run: its distinct-text batches are a pure function
    of the seed and the step, as every task's (issue 29)."""
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:]
    words = [line.rsplit("\t", 1)[0].split() for line in lines]
    pairs = [(" ".join(w[: len(w) // 2]), " ".join(w[len(w) // 2 :])) for w in words if len(w) > 5]
    (tmp_path / "pairs.tsv").write_text("".join(f"{q}\t{p}\n" for q, p in dict(pairs[:64]).items()))
    preset = tiny_preset(tmp_path / "tiny")
    argv = ["finetune", "embed", "--preset", str(preset), "--train", str(tmp_path / "pairs.tsv")]
    argv += ["--validation", str(tmp_path / "pairs.tsv"), "--batch-size", "8"]
    argv += ["--sequence-length", "32", "--checkpoint-every", "4", *FAST]
    assert main([*argv, "--output", str(tmp_path / "straight")]) == 0
    with mock.patch.object(finetune_job, "tensorboard", lambda output: Kill(step=5)):
        assert main([*argv, "--output", str(tmp_path / "killed")]) == 130
    assert main([*argv, "--output", str(tmp_path / "killed")]) == 0  # the same command again
    straight, resumed = (load_file(tmp_path / run / "preset" / "model.weights.safetensors")
                         for run in ("straight", "killed"))  # fmt: skip
    assert straight.keys() == resumed.keys()
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)


def _run(directory, kill_at=None):
    rng = np.random.default_rng(2)
    lengths = rng.integers(3, 33, 48)
    x = {
        "token_ids": rng.integers(1, 1000, (48, 32)).astype("int32"),
        "segment_ids": np.zeros((48, 32), "int32"),
        "padding_mask": (np.arange(32) < lengths[:, None]).astype("int32"),
    }
    y = rng.integers(0, 2, 48).astype("int32")
    schedule = batching.BatchSchedule(lengths, 4, [16, 32], seed=3)
    stream = batching.training_stream(x, y, schedule, sequence_targets=False)
    first = next(stream(0))
    assert isinstance(first[0]["token_ids"], np.ndarray)  # numpy batches, no tf.data
    keras.utils.set_random_seed(5)
    encoder = kbz.build_encoder(
        vocabulary_size=1000, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=32, dropout=DROPOUT,
    )  # fmt: skip
    model = kbz.build_classifier(encoder, 2, dropout=DROPOUT)
    optimizer = kbz.training.create_optimizer(1e-3, 9, 0.1)
    model.compile(optimizer, kbz.tasks.classifier_loss(2), jit_compile=False)  # 3 models
    callbacks = [] if kill_at is None else [Kill(step=kill_at)]
    fit_resumable(model, stream, 9, 3, directory, callbacks=callbacks, verbose=0)
    return model


def check_exact_resume(tmp_path):
    """A run killed after step 4 (inside an interval) and run again ends with the weights
    of the uninterrupted run: the numpy stream starts at the checkpoint's batch."""
    straight = _run(tmp_path / "straight")
    try:
        _run(tmp_path / "killed", kill_at=4)
        raise AssertionError("the run was not killed")
    except KeyboardInterrupt:
        pass
    resumed = _run(tmp_path / "killed")
    for a, b in zip(straight.weights, resumed.weights, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(b), keras.ops.convert_to_numpy(a), atol=1e-6, err_msg=a.path
        )


def _pretrain(preset, output) -> int:
    """`kbz pretrain --text-file` from scratch: 6 steps of 4 pairs, checkpoints every 2."""
    argv = ["pretrain", "--preset", str(preset), "--text-file", str(SENTENCES), "--from-scratch"]
    argv += ["--output", str(output), "--num-train-steps", "6", "--checkpoint-every", "2"]
    argv += ["--batch-size", "4", "--max-seq-length", "32", "--max-predictions-per-seq", "5"]
    return main([*argv, "--learning-rate", "1e-3", *JIT])


def check_pretrain_from_text(tmp_path):
    """`kbz pretrain --text-file` masks the text on the fly into numpy batches: its preset
    loads, its losses are finite, and a run killed after step 3 (its checkpoint: step 2) and
    run again ends with the uninterrupted run's weights. `--input-file` (TFRecords) says it
    needs TensorFlow before anything is made."""
    preset = tiny_preset(tmp_path / "tiny")
    assert _pretrain(preset, tmp_path / "straight") == 0
    metrics = json.loads((tmp_path / "straight" / "metrics.json").read_text())
    assert "loss" in metrics and all(np.isfinite(v) for v in metrics.values()), metrics
    written = str(tmp_path / "straight" / "preset")
    assert kbz.from_preset(written, task="pretrainer").count_params() > 1_000_000  # with heads
    assert kbz.from_preset(written).count_params() == kbz.from_preset(preset).count_params()
    with mock.patch.object(pretrain_job, "tensorboard", lambda output: Kill(step=3)):
        assert _pretrain(preset, tmp_path / "killed") == 130  # Ctrl-C, or a crash
    assert (tmp_path / "killed" / "checkpoints" / "state.json").is_file()
    assert _pretrain(preset, tmp_path / "killed") == 0  # the same command again
    straight, resumed = (load_file(tmp_path / run / "preset" / "model.weights.safetensors")
                         for run in ("straight", "killed"))  # fmt: skip
    assert straight.keys() == resumed.keys()
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)
    records = tmp_path / "records"
    with pytest.raises(MissingExtraError, match=r"--input-file.*pip install 'keras-bert-zoo\["):
        pretrain_job.run_pretrain(str(preset), str(records), input_file=str(SENTENCES))
    assert not records.exists() and "tensorflow" not in sys.modules
