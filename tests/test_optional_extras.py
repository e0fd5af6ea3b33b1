"""Optional libraries a run needs are checked when it starts (keras_bert_zoo/jobs/logs.py,
keras_bert_zoo/export/__init__.py): TensorBoard's absence (TensorFlow 2.21 no longer installs
it) costs the logs only, said once at the start; the SavedModel export's missing serving API
is named with its extra before any work."""

import json
import logging
import sys
from pathlib import Path

import pytest
from conftest import save_tiny_preset

from keras_bert_zoo.cli import main

DATA = Path(__file__).parent / "data"


@pytest.fixture
def without(monkeypatch):
    """Makes modules not importable in this process, as where they are not installed."""

    def block(*names):
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return block


def test_finetune_without_tensorboard_finishes_and_says_so_once_at_the_start(
    tmp_path, without, caplog
):
    without("tensorboard", "tensorboard.summary", "tensorboard.summary.v2")
    train = tmp_path / "train.tsv"
    train.write_text("".join((DATA / "finetune" / "sst2_train_head.tsv").open().readlines()[:33]))
    output = tmp_path / "out"
    command = ["finetune", "classify", "--preset", str(save_tiny_preset(tmp_path / "p"))]
    command += ["--train", str(train), "--validation", str(train), "--output", str(output)]
    command += ["--epochs", "1", "--batch-size", "16", "--sequence-length", "32"]
    with caplog.at_level(logging.INFO):
        assert main([*command, "--no-jit-compile", "--no-export"]) == 0
    said = [r for r in caplog.records if "TensorBoard" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, said
    assert "pip install 'keras-bert-zoo[tensorflow]'" in said[0].getMessage()
    # said before the first step: the run's first record about the run itself
    assert caplog.records.index(said[0]) < min(
        i for i, r in enumerate(caplog.records) if "Validation" in r.getMessage()
    )
    assert not (output / "logs").exists()
    assert set(json.loads((output / "metrics.json").read_text())) >= {"accuracy", "f1"}
    assert (output / "model.keras").is_file() and (output / "preset").is_dir()


def test_where_tensorboard_imports_the_start_of_a_run_says_nothing(tmp_path, caplog):
    # The other side of the check above: where TensorBoard imports, no line.
    from keras_bert_zoo.jobs.logs import check_tensorboard, tensorboard_missing

    assert tensorboard_missing() is None
    with caplog.at_level(logging.INFO):
        check_tensorboard(tmp_path)
    assert not caplog.records


def test_finetune_without_the_serving_api_skips_the_export_with_one_warning(without, caplog):
    from keras_bert_zoo.export import export_on_this_backend

    without("tensorflow_serving", "tensorflow_serving.apis.prediction_log_pb2")
    with caplog.at_level(logging.WARNING):
        assert export_on_this_backend(True, "runs/x/preset") is False
    (line,) = [r.getMessage() for r in caplog.records]
    assert "tensorflow_serving.apis.prediction_log_pb2 is not installed" in line
    assert "pip install 'keras-bert-zoo[tensorflow]'" in line and "--no-export" in line


def test_kbz_export_without_the_serving_api_stops_before_any_work(tmp_path, without, capsys):
    without("tensorflow_serving", "tensorflow_serving.apis.prediction_log_pb2")
    destination = tmp_path / "export"
    assert main(["export", str(tmp_path / "no-such-preset"), str(destination)]) == 2
    error = capsys.readouterr().err
    assert "kbz export: error: The SavedModel export needs TensorFlow" in error
    assert "tensorflow_serving.apis.prediction_log_pb2 is not installed" in error
    assert not destination.exists()
