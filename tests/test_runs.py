"""The training jobs (`kbz finetune`, `kbz pretrain`) on tiny models and real data samples:
outputs written, metrics computed, exact resume after an interruption, NaN handling."""

import errno
import gc
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import Kill, powers_of_two_buckets, save_tiny_preset
from safetensors.numpy import load_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.jobs import finetune as runs
from keras_bert_zoo.jobs import pretrain as pretrain_runs
from keras_bert_zoo.jobs.rundir import RunDirectory

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    """A 1-layer random BERT on the real uncased vocabulary, as a preset directory."""
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


def _lines(source: Path, destination: Path, count: int) -> Path:
    destination.write_text("".join(source.read_text().splitlines(True)[:count]))
    return destination


@pytest.mark.parametrize(
    "task, train, validation, keys",
    [
        ("classify", "sst2_train_head.tsv", "sst2_train_head.tsv", {"accuracy", "f1"}),
        ("tag", "wnut17_train_head.conll", "wnut17_dev_head.conll", {"precision", "recall", "f1"}),
        ("qa", "squad_v1.1_sample.json", "squad_v1.1_sample.json", {"exact_match", "f1"}),
    ],
)
def test_finetune_cli_writes_everything(tiny_preset, tmp_path, task, train, validation, keys):
    train_path = DATA / "finetune" / train
    if task == "classify":
        train_path = _lines(train_path, tmp_path / "train.tsv", 65)
    output = tmp_path / "out"
    status = main(
        [
            "finetune",
            task,
            "--preset",
            str(tiny_preset),
            "--train",
            str(train_path),
            "--validation",
            str(DATA / "finetune" / validation),
            "--output",
            str(output),
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--sequence-length",
            "64" if task != "qa" else "96",
            "--learning-rate",
            "1e-3",
            # classify keeps the default path, XLA; the other two skip its per-bucket compiles
            *([] if task == "classify" else ["--no-jit-compile"]),
        ]
    )
    assert status == 0
    record = json.loads((output / "metrics.json").read_text())
    metrics = {k: v for k, v in record.items() if k not in ("kept_epoch", "history")}
    assert set(metrics) == keys and all(np.isfinite(list(metrics.values())))
    assert [e["epoch"] for e in record["history"]] == [1] and record["kept_epoch"] == 1
    assert (output / "model.keras").is_file() and (
        output / "export" / "1" / "saved_model.pb"
    ).is_file()
    task_name = {"classify": "classifier", "tag": "tagger", "qa": "question_answerer"}[task]
    restored = kbz.from_preset(str(output / "preset"), task=task_name)
    # the preset records the run's length, the default of `kbz export` (issue 30, 9)
    length = 64 if task != "qa" else 96
    assert kbz.presets.load_preset_config(str(output / "preset")).sequence_length == length
    assert kbz.BertPreprocessor.from_preset(str(output / "preset")).sequence_length == length
    reloaded = keras.models.load_model(output / "model.keras", safe_mode=True)
    x = {
        "token_ids": np.full((2, 16), 1000, "int32"),
        "segment_ids": np.zeros((2, 16), "int32"),
        "padding_mask": np.ones((2, 16), "int32"),
    }
    for a, b in zip(keras.tree.flatten(restored(x)), keras.tree.flatten(reloaded(x)), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    _check_predict(task, output, DATA / "finetune" / validation, tmp_path, metrics)


PREDICTION_FILES = {
    "classify": "predictions.tsv",
    "tag": "predictions.conll",
    "qa": "predictions.json",
}


def _check_predict(task, run, validation, tmp_path, metrics):
    """`kbz predict` on the validation file writes the same predictions and metrics as the
    fine-tuning run did, in the formats users expect."""
    written = run / PREDICTION_FILES[task]
    predicted = tmp_path / f"again_{PREDICTION_FILES[task]}"
    assert (
        main(
            [
                "predict",
                task,
                "--model",
                str(run),
                "--input",
                str(validation),
                "--output",
                str(predicted),
            ]
        )
        == 0
    )
    assert predicted.read_text() == written.read_text()
    if task == "classify":
        rows = [line.split("\t") for line in written.read_text().splitlines()]
        assert rows[0] == ["index", "prediction", "probability_0", "probability_1"]
        assert [r[0] for r in rows[1:]] == [str(i) for i in range(len(rows) - 1)]
        labels = [line.split("\t")[1] for line in validation.read_text().splitlines()[1:] if line]
        accuracy = np.mean([r[1] == label for r, label in zip(rows[1:], labels, strict=True)])
        assert accuracy == pytest.approx(metrics["accuracy"])
        assert all(abs(float(r[2]) + float(r[3]) - 1) < 1e-5 for r in rows[1:])
        fixed = tmp_path / "fixed_predictions.tsv"  # full padding: the same probabilities
        command = ["predict", task, "--model", str(run), "--input", str(validation)]
        assert main([*command, "--output", str(fixed), "--no-bucketing"]) == 0
        fixed_rows = [line.split("\t") for line in fixed.read_text().splitlines()]
        assert [r[:2] for r in fixed_rows] == [r[:2] for r in rows]
        np.testing.assert_allclose(
            np.array([r[2:] for r in fixed_rows[1:]], float),
            np.array([r[2:] for r in rows[1:]], float),
            atol=2e-6,
        )
    elif task == "tag":
        gold = kbz.data.read_conll(validation)
        ours = [block.split("\n") for block in written.read_text().strip("\n").split("\n\n")]
        assert [[line.split("\t")[0] for line in b] for b in ours] == [
            s.words for s in gold.sentences
        ]
        tags = [[line.split("\t")[1] for line in b] for b in ours]
        scores = kbz.metrics.entity_scores([s.tags for s in gold.sentences], tags)
        assert scores["f1"] == pytest.approx(metrics["f1"])
    else:  # the official SQuAD v1.1 rules on predictions.json give metrics.json's numbers
        answers = json.loads(written.read_text())
        gold = {e.qas_id: [a.text for a in e.answers] for e in kbz.data.read_squad(validation)}
        assert set(answers) == set(gold)
        scores = kbz.metrics.squad_scores(answers, gold)
        assert scores == pytest.approx(metrics)
        nbest = json.loads((run / "nbest_predictions.json").read_text())
        contexts = {e.qas_id: e.context for e in kbz.data.read_squad(validation)}
        for qas_id, entries in nbest.items():
            assert entries[0]["text"] == answers[qas_id]
            keys = {"text", "probability", "start_logit", "end_logit", "answer_start", "answer_end"}
            context = contexts[qas_id]
            for entry in entries:
                assert set(entry) == keys
                if entry["answer_start"] >= 0:  # character offsets of the text, end exclusive
                    assert context[entry["answer_start"] : entry["answer_end"]] == entry["text"]
                else:
                    assert entry["text"] == "empty" and entry["answer_end"] == -1
            assert abs(sum(e["probability"] for e in entries) - 1) < 1e-6


@pytest.mark.parametrize("keep", ["best", "last"])
def test_validation_after_every_epoch_and_the_best_epoch_kept(tiny_preset, tmp_path, keep):
    train = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "train.tsv", 97)
    validation = DATA / "finetune" / "sst2_train_head.tsv"
    output = tmp_path / keep
    frozen = gc.get_freeze_count()  # tests/conftest.py freezes the heap between tests
    assert (
        main(
            [
                "finetune",
                "classify",
                "--preset",
                str(tiny_preset),
                "--train",
                str(train),
                "--validation",
                str(validation),
                "--output",
                str(output),
                "--epochs",
                "4",
                "--batch-size",
                "16",
                "--sequence-length",
                "32",
                "--learning-rate",
                "3e-3",
                "--no-export",
                "--no-jit-compile",
                "--keep",
                keep,
            ]
        )
        == 0
    )
    record = json.loads((output / "metrics.json").read_text())
    history = record["history"]
    assert [e["epoch"] for e in history] == [1, 2, 3, 4]
    best = max(history, key=lambda e: e["accuracy"])
    kept = best if keep == "best" else history[-1]
    assert record["kept_epoch"] == kept["epoch"]
    # the written model is that epoch's: its metrics are the ones recorded for it
    assert record["accuracy"] == pytest.approx(kept["accuracy"])
    assert record["f1"] == pytest.approx(kept["f1"])
    assert {"epoch_learning_rate", "epoch_loss"} <= _summary_tags(output / "logs" / "train")
    assert {"epoch_accuracy", "epoch_f1"} <= _summary_tags(output / "logs" / "validation")
    # the run hands its frozen objects back, unless its caller had frozen the heap (heap.py)
    assert gc.get_freeze_count() >= frozen if frozen else gc.get_freeze_count() == 0


def _summary_tags(directory) -> set:
    """The tags of every scalar in the TensorBoard event files of `directory`."""
    tags = set()
    for path in directory.glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            tags |= {value.tag for value in event.summary.value}
    return tags


def test_predict_text_without_labels(tiny_preset, tmp_path, capsys):
    train = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "train.tsv", 65)
    assert (
        main(
            [
                "finetune",
                "classify",
                "--preset",
                str(tiny_preset),
                "--train",
                str(train),
                "--validation",
                str(train),
                "--output",
                str(tmp_path / "run"),
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--sequence-length",
                "32",
                "--no-export",
                "--no-jit-compile",
            ]
        )
        == 0
    )
    (tmp_path / "text.tsv").write_text("sentence\na gripping film\ndull\n")
    capsys.readouterr()
    assert (
        main(
            [
                "predict",
                "classify",
                "--model",
                str(tmp_path / "run"),
                "--input",
                str(tmp_path / "text.tsv"),
                "--output",
                str(tmp_path / "p.tsv"),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == f"Wrote {tmp_path / 'p.tsv'}"  # no metrics
    assert len((tmp_path / "p.tsv").read_text().splitlines()) == 3
    assert (
        main(
            [
                "predict",
                "tag",
                "--model",
                str(tmp_path / "run"),
                "--input",
                str(tmp_path / "text.tsv"),
                "--output",
                str(tmp_path / "q"),
            ]
        )
        == 2
    )
    assert "holds a classifier model, not a tagger" in capsys.readouterr().err


def _pretrain(output, **overrides):
    arguments = dict(
        text_file=str(DATA / "pretraining" / "sentences.txt"),
        from_scratch=True,
        num_train_steps=6,
        batch_size=4,
        max_seq_length=32,
        max_predictions_per_seq=5,
        checkpoint_every=2,
        learning_rate=1e-3,
        jit_compile=False,  # checkpoints and resume are the point; XLA's resume is in test-e2e
        verbose=0,
    )
    arguments.update(overrides)
    return pretrain_runs.run_pretrain("bert_tiny_en_uncased", str(output), **arguments)


def test_interrupted_pretraining_resumes_to_the_same_weights(tmp_path, monkeypatch):
    _pretrain(tmp_path / "straight")
    monkeypatch.setattr(pretrain_runs, "tensorboard", lambda output: Kill(step=3))
    with pytest.raises(KeyboardInterrupt):
        _pretrain(tmp_path / "interrupted")
    newest = _checkpoints(tmp_path / "interrupted")[-1]
    assert (newest["interval"], newest["step"]) == (1, 2)  # step 3 was lost with the crash
    monkeypatch.undo()
    _pretrain(tmp_path / "interrupted")  # the same command again
    straight = load_file(tmp_path / "straight" / "preset" / "model.weights.safetensors")
    resumed = load_file(tmp_path / "interrupted" / "preset" / "model.weights.safetensors")
    assert straight.keys() == resumed.keys()
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="NaN or Inf.*last good checkpoint"):
        _pretrain(tmp_path / "nan", learning_rate=1e12, num_train_steps=8)
    state = tmp_path / "nan" / "checkpoints" / "state.json"
    if state.exists():  # whatever was written is a complete, finite checkpoint
        name = _checkpoints(tmp_path / "nan")[-1]["weights"]
        assert (tmp_path / "nan" / "checkpoints" / name).is_file()


def _weights(output):
    return load_file(output / "preset" / "model.weights.safetensors")


def _checkpoints(output) -> list:
    return json.loads((output / "checkpoints" / "state.json").read_text())["checkpoints"]


def _assert_same_weights(first, second):
    a, b = _weights(first), _weights(second)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-6, err_msg=name)


@pytest.fixture
def keep_checkpoints_at_completion(monkeypatch):
    """A finished run deletes its checkpoints; tests that inspect them keep them."""
    monkeypatch.setattr(RunDirectory, "complete", lambda self, metrics: None)


@pytest.mark.e2e  # a kill, a damaged file, the run again
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path, monkeypatch, caplog):
    _pretrain(tmp_path / "straight", num_train_steps=8, checkpoint_every=2)
    monkeypatch.setattr(pretrain_runs, "tensorboard", lambda output: Kill(step=7))
    with pytest.raises(KeyboardInterrupt):
        _pretrain(tmp_path / "damaged", num_train_steps=8, checkpoint_every=2, keep_checkpoints=2)
    monkeypatch.undo()
    kept = _checkpoints(tmp_path / "damaged")
    assert [c["step"] for c in kept] == [4, 6]  # the newest two; ckpt-1's files are deleted
    assert sorted(p.name for p in (tmp_path / "damaged" / "checkpoints").glob("ckpt-*")) == [
        "ckpt-2.seeds.npz",
        "ckpt-2.weights.h5",
        "ckpt-3.seeds.npz",
        "ckpt-3.weights.h5",
    ]
    newest = tmp_path / "damaged" / "checkpoints" / "ckpt-3.weights.h5"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a truncated copy
    _pretrain(tmp_path / "damaged", num_train_steps=8, checkpoint_every=2, keep_checkpoints=2)
    assert "ckpt-3.weights.h5 has" in caplog.text and "falling back" in caplog.text
    _assert_same_weights(tmp_path / "straight", tmp_path / "damaged")  # steps 5-8 re-trained


@pytest.mark.e2e  # two runs
def test_pretraining_checkpoints_by_default(tmp_path, monkeypatch, keep_checkpoints_at_completion):
    monkeypatch.setattr(pretrain_runs, "DEFAULT_CHECKPOINT_EVERY", 2)  # 1000 in real runs
    _pretrain(tmp_path / "default", num_train_steps=6, checkpoint_every=None)
    assert [c["step"] for c in _checkpoints(tmp_path / "default")] == [2, 4, 6]
    _pretrain(tmp_path / "short", num_train_steps=3, checkpoint_every=None)
    assert [c["step"] for c in _checkpoints(tmp_path / "short")] == [2, 3]


@pytest.mark.e2e  # the run again
def test_a_finished_run_keeps_its_results_and_says_so(tmp_path, caplog):
    first = _pretrain(tmp_path / "run", num_train_steps=4)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "complete" and record["metrics"] == first
    assert not (tmp_path / "run" / "checkpoints").exists()  # not needed any more
    again = _pretrain(tmp_path / "run", num_train_steps=4, jit_compile=True)  # how, not what
    assert again == first and "already complete" in caplog.text
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == first


@pytest.mark.e2e  # two runs
def test_a_different_run_in_the_same_output_is_refused_with_the_differences(tmp_path):
    _pretrain(tmp_path / "run", num_train_steps=4)
    with pytest.raises(
        ValueError,
        match=r"learning_rate: was 0.001, now 0.002; "
        r"num_train_steps: was 4, now 6.*--overwrite",
    ):
        _pretrain(tmp_path / "run", num_train_steps=6, learning_rate=2e-3)
    other_text = tmp_path / "other.txt"
    other_text.write_text((DATA / "pretraining" / "sentences.txt").read_text()[:-200])
    with pytest.raises(ValueError, match="--text-file: the input file"):
        _pretrain(tmp_path / "run", num_train_steps=4, text_file=str(other_text))
    again = _pretrain(tmp_path / "run", num_train_steps=6, learning_rate=2e-3, overwrite=True)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["metrics"] == again


def test_an_output_directory_of_other_files_is_not_reused(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds files .*notes.txt.* no kbz run record"):
        _pretrain(tmp_path / "busy", num_train_steps=2)
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_a_second_run_writing_the_same_output_stops_at_once(tmp_path):
    with RunDirectory(tmp_path / "run", "pretrain", {}, {}):
        with pytest.raises(ValueError, match=r"being written by another kbz run \(pid \d+\)"):
            with RunDirectory(tmp_path / "run", "pretrain", {}, {}):
                pass
    with RunDirectory(tmp_path / "run", "pretrain", {}, {}):  # released: the same run again
        (tmp_path / "run" / "checkpoints").mkdir()  # with a checkpoint: a run to resume
        (tmp_path / "run" / "checkpoints" / "state.json").write_text('{"checkpoints": []}')
    with pytest.raises(ValueError, match="differs in command"):  # refused inside __enter__...
        RunDirectory(tmp_path / "run", "finetune", {}, {}).__enter__()
    with RunDirectory(tmp_path / "run", "pretrain", {}, {}):  # ...still releases its lock
        pass


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(
    tmp_path, monkeypatch, keep_checkpoints_at_completion
):
    calls = []

    def full_disk(self, filepath, overwrite=True, **kwargs):
        calls.append(filepath)
        if len(calls) == 2:
            Path(filepath).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, filepath, overwrite=overwrite, **kwargs)

    real = keras.Model.save_weights
    monkeypatch.setattr(keras.Model, "save_weights", full_disk)
    with pytest.raises(
        OSError,
        match="Could not write checkpoint ckpt-2.weights.h5.*No space "
        r"left.*checkpoint of step 2 is intact",
    ):
        _pretrain(tmp_path / "full", num_train_steps=6, checkpoint_every=2)
    assert [c["step"] for c in _checkpoints(tmp_path / "full")] == [2]
    assert sorted(p.name for p in (tmp_path / "full" / "checkpoints").iterdir()) == [
        "ckpt-1.seeds.npz",
        "ckpt-1.weights.h5",
        "state.json",
    ]  # no partial file left


def test_flags_xla_is_the_default():
    from keras_bert_zoo.cli import build_parser
    from keras_bert_zoo.cli.compile_flags import resolve_jit_compile

    base = ["pretrain", "--preset", "p", "--output", "o"]
    args = build_parser().parse_args(base)
    assert args.jit_compile is None  # the backend's default: on here (off on PyTorch)
    resolve_jit_compile(args)
    assert args.jit_compile is True
    assert build_parser().parse_args([*base, "--no-jit-compile"]).jit_compile is False
    assert build_parser().parse_args(base).keep_checkpoints == 3
    for command in (
        ["finetune", "classify", "--preset", "p", "--train", "t", "--validation", "v"],
        ["predict", "classify", "--model", "m", "--input", "i"],
    ):
        command = [*command, "--output", "o"]
        assert build_parser().parse_args(command).bucketing is True
        assert build_parser().parse_args([*command, "--no-bucketing"]).bucketing is False


@pytest.mark.e2e  # two runs
def test_a_shorter_last_interval_trains_exactly_the_steps_of_one_straight_run(
    tmp_path, keep_checkpoints_at_completion
):
    # 5 steps in intervals of 2, 2 and 1 equal 5 steps in one interval: same data order,
    # dropout masks and learning-rate schedule (which reaches zero on the last step).
    _pretrain(tmp_path / "intervals", num_train_steps=5, checkpoint_every=2)
    _pretrain(tmp_path / "straight", num_train_steps=5, checkpoint_every=5)
    assert [c["step"] for c in _checkpoints(tmp_path / "intervals")] == [2, 4, 5]
    straight, intervals = _weights(tmp_path / "straight"), _weights(tmp_path / "intervals")
    for name in straight:
        np.testing.assert_allclose(intervals[name], straight[name], atol=1e-6, err_msg=name)


def test_an_interval_longer_than_the_run_is_an_error_before_any_work(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"interval \(5 steps\) is longer than "
        r"--num-train-steps 4 \(4 steps\).*--checkpoint-every 4",
    ):
        _pretrain(tmp_path / "bad", num_train_steps=4, checkpoint_every=5)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "flags, steps",
    [
        ([], 4),  # bucketed: 64 sentences pay for no second compile (one length, 32): 4
        (["--no-bucketing"], 4),  # 64 sentences padded to 32 tokens: 4 batches
    ],
)
def test_finetune_with_an_interval_longer_than_the_run_stops_before_training(
    tiny_preset, tmp_path, capsys, flags, steps
):
    train = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "train.tsv", 65)
    status = main(
        [
            "finetune",
            "classify",
            "--preset",
            str(tiny_preset),
            "--train",
            str(train),
            "--validation",
            str(train),
            "--output",
            str(tmp_path / "out"),
            "--epochs",
            "2",
            "--batch-size",
            "16",
            "--sequence-length",
            "32",
            "--checkpoint-every",
            "100",
            *flags,
        ]
    )
    error = capsys.readouterr().err
    assert (
        status == 2 and f"(100 steps) is longer than the run (2 epochs of {steps} steps)" in error
    )
    assert f"--checkpoint-every {2 * steps} or less" in error and not (tmp_path / "out").exists()


def test_finetune_with_one_batch_of_mixed_lengths_trains_it(tiny_preset, tmp_path, capsys):
    # 16 sentences, a batch of 16: 13 fit 16 tokens and 3 need 32. Powers of two as lengths
    # left no whole batch (an error); the chosen lengths keep one (`training_buckets`).
    train = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "train.tsv", 17)
    command = ["finetune", "classify", "--preset", str(tiny_preset), "--train", str(train)]
    command += ["--validation", str(train), "--output", str(tmp_path / "out"), "--epochs", "1"]
    command += ["--no-jit-compile", "--no-packing"]  # the buckets chosen are the point
    assert main([*command, "--batch-size", "16", "--sequence-length", "32"]) == 0
    assert "accuracy" in json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert main([*command, "--batch-size", "17", "--no-bucketing", "--overwrite"]) == 2
    assert "gives 16 training sequences, fewer than one batch of 17" in capsys.readouterr().err


def _finetune(tiny_preset, train, validation, output):
    return runs.run_finetune(
        "classifier",
        str(tiny_preset),
        str(train),
        str(validation),
        str(output),
        epochs=2,
        batch_size=16,
        sequence_length=32,
        learning_rate=1e-3,
        checkpoint_every=2,
        export=False,
        verbose=0,
        packing=False,  # length buckets: their steps are counted below
    )


@pytest.mark.e2e  # a kill, then the run again
def test_interrupted_bucketed_finetuning_resumes_to_the_same_weights(
    tiny_preset, tmp_path, monkeypatch
):
    """Bucketing (the default) batches by length from a seeded schedule; a crash in the second
    epoch, then the same call: the final weights equal an uninterrupted run's."""
    train = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "train.tsv", 65)
    validation = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "dev.tsv", 17)
    powers_of_two_buckets(monkeypatch)  # two lengths (16 and 32) in so small a run
    _finetune(tiny_preset, train, validation, tmp_path / "straight")
    # 64 sentences: 46 of at most 16 tokens (2 batches of 16), 18 longer (1): 6 steps in
    # checkpoint intervals of 2, each validated
    history = json.loads((tmp_path / "straight" / "metrics.json").read_text())["history"]
    assert [entry["epoch"] for entry in history] == [1, 2, 3]
    monkeypatch.setattr(runs, "tensorboard", lambda output: Kill(step=5))
    with pytest.raises(KeyboardInterrupt):
        _finetune(tiny_preset, train, validation, tmp_path / "interrupted")
    assert _checkpoints(tmp_path / "interrupted")[-1]["step"] == 4  # resumes inside epoch 2
    monkeypatch.undo()
    powers_of_two_buckets(monkeypatch)
    _finetune(tiny_preset, train, validation, tmp_path / "interrupted")
    _assert_same_weights(tmp_path / "straight", tmp_path / "interrupted")
    settings = json.loads((tmp_path / "interrupted" / "run.json").read_text())["settings"]
    assert settings["bucketing"] is True


def _pretrain_command(output, steps=12):
    return [
        sys.executable,
        "-m",
        "keras_bert_zoo.cli",
        "pretrain",
        "--preset",
        "bert_tiny_en_uncased",
        "--from-scratch",
        "--text-file",
        str(DATA / "pretraining" / "sentences.txt"),
        "--output",
        str(output),
        "--num-train-steps",
        str(steps),
        "--checkpoint-every",
        "3",
        "--batch-size",
        "4",
        "--max-seq-length",
        "32",
        "--max-predictions-per-seq",
        "5",
        "--learning-rate",
        "1e-3",
    ]


@pytest.mark.e2e
def test_sigkill_at_a_random_moment_then_same_command_resumes_exactly(tmp_path):
    """A real `kill -9` of `kbz pretrain` after its first checkpoint, at a seeded random
    delay, then the same command: the final weights equal an uninterrupted run's."""
    steps = 120  # with XLA, 12 steps could end within the random delay
    subprocess.run(_pretrain_command(tmp_path / "straight", steps), check=True, capture_output=True)
    output = tmp_path / "killed"
    process = subprocess.Popen(
        _pretrain_command(output, steps), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    state = output / "checkpoints" / "state.json"
    deadline = time.monotonic() + 300
    while not state.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(random.Random(7).uniform(0.0, 1.5))
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (output / "preset").exists(), "the run finished before it could be killed"
    state = json.loads((output / "checkpoints" / "state.json").read_text())
    assert state["checkpoints"][-1]["step"] < steps  # killed while training
    subprocess.run(_pretrain_command(output, steps), check=True, capture_output=True)
    straight = load_file(tmp_path / "straight" / "preset" / "model.weights.safetensors")
    resumed = load_file(output / "preset" / "model.weights.safetensors")
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)


@pytest.mark.e2e
def test_ctrl_c_ends_with_one_line_that_says_how_to_resume(tmp_path):
    output = tmp_path / "interrupted"
    process = subprocess.Popen(  # 3,000 steps: far more than run before the signal arrives
        _pretrain_command(output, steps=3000),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job (CI's, `make test &`) ignores SIGINT and its children
        # inherit that; a user's terminal delivers it. Give the child a terminal's default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    state = output / "checkpoints" / "state.json"
    deadline = time.monotonic() + 300
    while not state.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, error = process.communicate(timeout=300)
    assert process.returncode == 130, error[-2000:]
    assert "Traceback" not in error
    lines = [line for line in error.splitlines() if line.strip()]
    assert lines[-1].startswith("kbz pretrain: interrupted. The checkpoint of step ")
    assert lines[-1].endswith("is kept; re-run the same command to resume from it.")


@pytest.mark.parametrize(
    "command, flags, message",
    [
        ("finetune", ["--batch-size", "0"], "--batch-size must be a positive integer. Received: 0"),
        ("finetune", ["--batch-size", "-4"], "--batch-size must be a positive integer"),
        ("finetune", ["--epochs", "0"], "--epochs must be a positive integer. Received: 0"),
        ("finetune", ["--sequence-length", "2"], "--sequence-length must be between 8 and"),
        ("finetune", ["--learning-rate", "0"], "--learning-rate must be positive"),
        ("finetune", ["--warmup-fraction", "1"], "--warmup-fraction must be in [0, 1)"),
        ("finetune", ["--weight-decay", "-0.01"], "--weight-decay must be 0 (off) or positive"),
        (
            "pretrain",
            ["--max-seq-length", "1024"],
            "--max-seq-length must be between 8 and the preset's max_sequence_length 512. "
            "Received: 1024",
        ),
        ("pretrain", ["--batch-size", "0"], "--batch-size must be a positive integer"),
        ("pretrain", ["--text-file", "missing*.txt"], "--text-file: no file matches"),
        ("pretrain", ["--keep-checkpoints", "0"], "--keep-checkpoints must be a positive"),
    ],
)
def test_careless_flags_are_named_before_any_work_or_output(
    tmp_path, capsys, command, flags, message
):
    train = str(DATA / "finetune" / "sst2_train_head.tsv")
    base = {
        "finetune": [
            "finetune",
            "classify",
            "--preset",
            "bert_tiny_en_uncased",
            "--train",
            train,
            "--validation",
            train,
        ],
        "pretrain": [
            "pretrain",
            "--preset",
            "bert_tiny_en_uncased",
            "--from-scratch",
            "--text-file",
            str(DATA / "pretraining" / "sentences.txt"),
        ],
    }[command]
    if "--text-file" in flags:
        base = base[:-2]
    status = main([*base, "--output", str(tmp_path / "out"), *flags])
    error = capsys.readouterr().err
    assert status == 2 and message in error, error
    assert not (tmp_path / "out").exists()
