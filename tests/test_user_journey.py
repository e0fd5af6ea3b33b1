"""The user journey of issue 30, one test per finding: a failed start never blocks its retry,
`--overwrite` never deletes a file kbz did not write, resumes say so, messages name flags,
path errors name the flag (exit 2), gzip inputs read, logs stay plain text."""

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import Kill, save_tiny_classifier, save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import build_parser, main, messages
from keras_bert_zoo.jobs import pretrain as pretrain_runs
from keras_bert_zoo.jobs.rundir import RunDirectory

DATA = Path(__file__).parent / "data"
SST2 = DATA / "finetune" / "sst2_train_head.tsv"


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
    """A fine-tuned classifier's preset (random weights): what `kbz predict --model` takes."""
    return save_tiny_classifier(tmp_path_factory.mktemp("classifier") / "preset")


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """An empty weights cache and a mirror that has nothing: every download fails at once."""
    monkeypatch.setenv("KBZ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", str(tmp_path / "no-mirror"))


def _head(count: int, path: Path) -> Path:
    path.write_text("".join(SST2.read_text().splitlines(True)[:count]))
    return path


def _finetune(preset, train, output, *flags):
    return [
        "finetune", "classify", "--preset", str(preset), "--train", str(train),
        "--validation", str(train), "--output", str(output), "--epochs", "1",
        "--batch-size", "16", "--sequence-length", "32", "--no-jit-compile", "--no-export",
        *flags,
    ]  # fmt: skip


def _pretrain(output, *flags, steps=6):
    return [
        "pretrain", "--preset", "bert_tiny_en_uncased", "--from-scratch",
        "--text-file", str(DATA / "pretraining" / "sentences.txt"), "--output", str(output),
        "--num-train-steps", str(steps), "--checkpoint-every", "2", "--batch-size", "4",
        "--max-seq-length", "32", "--max-predictions-per-seq", "5", "--no-jit-compile", *flags,
    ]  # fmt: skip


# --- 2, 11: a failed start leaves nothing; a start that never trained is replaced ---------


def test_a_failed_download_writes_nothing_and_the_retry_runs(
    offline, tiny_preset, tmp_path, capsys
):
    train, output = _head(65, tmp_path / "train.tsv"), tmp_path / "runs" / "out"
    assert main(_finetune("bert_tiny_en_uncased", train, output)) == 2
    error = capsys.readouterr().err
    assert "are not available on this machine" in error and "load_weights" not in error
    assert not (tmp_path / "runs").exists()  # nothing written to --output, nor its parent
    assert main(_finetune(tiny_preset, train, output)) == 0  # another preset: not refused
    assert json.loads((output / "run.json").read_text())["status"] == "complete"
    assert not (output / ".lock").exists()  # a finished run keeps no lock file


def test_an_error_before_the_first_checkpoint_leaves_nothing_behind(tmp_path):
    with pytest.raises(RuntimeError, match="broken"):
        with RunDirectory(tmp_path / "new" / "out", "finetune", {"a": 1}, {}):
            (tmp_path / "new" / "out" / "logs").mkdir()
            raise RuntimeError("broken")
    assert not (tmp_path / "new").exists()


def test_a_run_killed_before_its_first_checkpoint_is_replaced_without_overwrite(tmp_path, capsys):
    output = tmp_path / "out"
    output.mkdir()  # as `kill -9` leaves it: a lock file, "running", no checkpoint
    (output / ".lock").write_text("pid 1")
    (output / "logs").mkdir()
    record = {"command": "finetune", "settings": {"preset": "a"}, "inputs": {}}
    (output / "run.json").write_text(json.dumps({**record, "status": "running"}))
    (output / "notes.txt").write_text("mine")
    main(["presets"])  # the command line's status lines: printed at default verbosity
    with RunDirectory(output, "finetune", {"preset": "b"}, {}) as run:
        assert run.finished is None
    assert "stopped before its first checkpoint (it differed in preset" in capsys.readouterr().out
    stored = json.loads((output / "run.json").read_text())
    assert stored["settings"] == {"preset": "b"} and stored["status"] == "running"
    assert not (output / "logs").exists() and (output / "notes.txt").read_text() == "mine"


def test_overwrite_deletes_only_what_a_run_wrote(tmp_path):
    output = tmp_path / "out"
    with RunDirectory(output, "pretrain", {"steps": 1}, {}) as run:
        (output / "metrics.json").write_text("{}")
        run.complete({})
    (output / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds files no kbz run wrote \(notes.txt\)"):
        RunDirectory(output, "pretrain", {"steps": 2}, {}, overwrite=True).__enter__()
    assert (output / "notes.txt").read_text() == "mine" and (output / "metrics.json").exists()
    (output / "notes.txt").unlink()
    with RunDirectory(output, "pretrain", {"steps": 2}, {}, overwrite=True):
        assert not (output / "metrics.json").exists()


# --- 3: kbz export --overwrite never deletes a file it did not write -------------------------


@pytest.mark.e2e  # three exports
@pytest.mark.parametrize("onnx", [False, True])
def test_export_refuses_a_folder_of_foreign_files_naming_them(
    classifier_preset, tmp_path, capsys, onnx
):
    destination = tmp_path / "sm" / "1"
    destination.mkdir(parents=True)
    (destination / "notes.txt").write_text("mine")
    command = ["export", str(classifier_preset), str(destination), "--sequence-length", "16"]
    command += ["--format", "onnx"] if onnx else []
    for flags in ([], ["--overwrite"]):
        assert main([*command, *flags]) == 2
        error = capsys.readouterr().err
        assert "holds files kbz did not write (notes.txt)" in error, error
        assert "already holds" not in error
    assert [p.name for p in destination.iterdir()] == ["notes.txt"]
    (destination / "notes.txt").unlink()  # an empty folder takes the export
    assert main(command) == 0
    assert main(command) == 2  # an earlier export: replaced only with --overwrite
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*command, "--overwrite"]) == 0  # every file it wrote is its own


def test_convert_overwrite_replaces_its_own_output_only(tiny_preset, tmp_path, capsys):
    command = ["convert", str(tiny_preset), str(tmp_path / "hf"), "--to", "huggingface"]
    assert main(command) == 0
    assert main(command) == 2 and "pass --overwrite" in capsys.readouterr().err
    assert main([*command, "--overwrite"]) == 0  # every file it wrote is its own
    (tmp_path / "hf" / "notes.txt").write_text("mine")
    assert main([*command, "--overwrite"]) == 2
    assert "holds files kbz did not write (notes.txt)" in capsys.readouterr().err
    assert (tmp_path / "hf" / "notes.txt").read_text() == "mine"


# --- 5, 11: resumes say so; pretraining counts steps; logs get plain lines ---------------


@pytest.mark.e2e  # kills, then the runs again
def test_resume_and_restart_say_so_and_pretraining_counts_steps(tmp_path, monkeypatch, capsys):
    output = tmp_path / "run"
    monkeypatch.setattr(pretrain_runs, "tensorboard", lambda output: Kill(step=3))
    assert main(_pretrain(output)) == 130  # Ctrl-C, or a crash, after step 3
    monkeypatch.undo()
    capsys.readouterr()
    assert main(_pretrain(output)) == 0
    out = capsys.readouterr().out
    checkpoint = output / "checkpoints" / "ckpt-1.weights.h5"
    assert f"Resumed from checkpoint {checkpoint} at step 2 of 6." in out
    assert "step 4/6" in out and "step 6/6" in out and "Epoch" not in out
    assert "\r" not in out and "\x1b" not in out  # stdout is not a terminal here
    assert f"{output / 'preset'}: the pretrained preset" in out  # outputs listed
    # killed (`kill -9`: no clean-up) before the first checkpoint, then the same command
    monkeypatch.setattr(pretrain_runs, "tensorboard", lambda output: Kill(step=1))
    monkeypatch.setattr(RunDirectory, "__exit__", lambda self, *error: self._lock.close())
    assert main(_pretrain(tmp_path / "killed")) == 130
    monkeypatch.undo()
    assert (tmp_path / "killed" / "run.json").is_file()
    capsys.readouterr()
    assert main(_pretrain(tmp_path / "killed")) == 0
    assert "stopped before its first checkpoint; starting over from step 0" in (
        capsys.readouterr().out
    )


def test_finetune_progress_in_a_log_file_is_plain_lines(tiny_preset, tmp_path, capsys):
    train = _head(65, tmp_path / "train.tsv")
    assert main(_finetune(tiny_preset, train, tmp_path / "out", "--epochs", "2")) == 0
    out = capsys.readouterr().out
    assert "Epoch 2/2" in out and "\r" not in out and "\x1b" not in out


# --- 6: messages name flags, and their fixes work ----------------------------------------


@pytest.mark.parametrize(
    "command, python, flags",
    [
        ("predict", "`sequence_length` must be at most 512. Received: sequence_length=600.",
         "--sequence-length must be at most 512. Received: --sequence-length 600."),
        ("export", "Choose another directory, or pass overwrite=True to replace it.",
         "Choose another directory, or pass --overwrite to replace it."),
        ("pretrain", "Use load_weights=False for fresh weights",
         "Use --from-scratch for fresh weights"),
        ("finetune", "use load_weights=False for fresh weights",
         "use kbz pretrain --from-scratch for fresh weights"),
        ("predict", "Pass `text_columns` as named", "Pass --text-columns as named"),
        ("finetune", "`bucketing` is off: bucketing=False", "--bucketing is off: --no-bucketing"),
        ("predict", "`num_heads` must divide", "`num_heads` must divide"),  # no such flag
    ],
)  # fmt: skip
def test_library_messages_are_shown_in_the_command_s_flags(command, python, flags):
    mapping = messages.command_flags(build_parser(), command)
    assert messages.for_command_line(python, mapping) == flags


def test_predict_sequence_length_error_names_the_flag(classifier_preset, tmp_path, capsys):
    command = ["predict", "classify", "--model", str(classifier_preset), "--input", str(SST2)]
    status = main([*command, "--output", str(tmp_path / "p.tsv"), "--sequence-length", "600"])
    error = capsys.readouterr().err
    assert status == 2 and "--sequence-length must be at most the preset's" in error, error
    assert "`sequence_length`" not in error and "sequence_length=" not in error


@pytest.mark.parametrize(
    "content, message",
    [
        ("id\ttext\tlabel\n1\ta fine film\t1\n", "has no column named 'sentence'"
         " (header: ['id', 'text', 'label']). Pass --text-columns as named in the header"),
        ("a gorgeous, witty film\t1\nawful\t0\n", "line 1: looks like an example, not a "
         "header line naming the columns (['a gorgeous, witty film', '1']). Add a first line "
         "such as 'sentence\\tlabel'"),
    ],
)  # fmt: skip
def test_tsv_header_problems_name_the_flag_or_the_missing_header(
    tiny_preset, tmp_path, capsys, content, message
):
    train = tmp_path / "train.tsv"
    train.write_text(content)
    assert main(_finetune(tiny_preset, train, tmp_path / "out")) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_missing_weights_message_gives_fixes_that_work(offline, tmp_path, capsys):
    command = [c for c in _pretrain(tmp_path / "w") if c != "--from-scratch"]
    assert main(command) == 2
    error = capsys.readouterr().err
    assert "--from-scratch for fresh random weights" in error and "load_weights" not in error
    # the archive as fetched (or its unzipped folder), never "unzip it, then convert the zip"
    assert "kbz convert " in error and "(the .zip as fetched, or the folder it unzips to)" in error
    assert not (tmp_path / "w").exists()


# --- 7: path errors name the flag, say what is expected, exit 2, before any work ------------


def test_path_errors_name_the_flag_and_exit_2(tiny_preset, classifier_preset, tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    cases = [
        (_finetune(tiny_preset, tmp_path / "adir", tmp_path / "o1"),
         "--train " + str(tmp_path / "adir") + " is a directory; expected a GLUE-style TSV file"),
        (_finetune(tiny_preset, tmp_path / "missing.tsv", tmp_path / "o2"),
         "--train " + str(tmp_path / "missing.tsv") + " does not exist; expected"),
        (["predict", "classify", "--model", str(classifier_preset), "--input", str(SST2),
          "--output", str(tmp_path / "adir")],
         f"--output {tmp_path / 'adir'} is a directory; expected the prediction file to write"),
        (["embed", "--model", str(tiny_preset), "--input", str(tmp_path / "adir"),
          "--output", str(tmp_path / "v.npy")], "--input " + str(tmp_path / "adir") + " is a"),
        (_pretrain(tmp_path / "o3")[:4] + ["--text-file", str(tmp_path / "adir"),
         "--output", str(tmp_path / "o3")], "is a directory; expected text files"),
    ]  # fmt: skip
    for command, message in cases:
        assert main(command) == 2, command
        error = capsys.readouterr().err
        assert message in error and "Errno" not in error and "/." not in error, error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]  # no output written


# --- 8: gzip inputs are read transparently ------------------------------------------------


def _gzip(source: Path, destination: Path) -> Path:
    destination.write_bytes(gzip.compress(source.read_bytes()))
    return destination


def test_gzip_inputs_read_as_their_plain_files(tmp_path):
    tsv = _gzip(SST2, tmp_path / "train.tsv.gz")
    plain, packed = kbz.data.read_glue_tsv(SST2), kbz.data.read_glue_tsv(tsv)
    assert packed.examples == plain.examples
    conll = DATA / "finetune" / "wnut17_dev_head.conll"
    assert (
        kbz.data.read_conll(_gzip(conll, tmp_path / "dev.conll.gz")).sentences
        == kbz.data.read_conll(conll).sentences
    )
    squad = DATA / "finetune" / "squad_v1.1_sample.json"
    assert kbz.data.read_squad(_gzip(squad, tmp_path / "s.json")) == kbz.data.read_squad(squad)
    (tmp_path / "broken.tsv.gz").write_bytes(gzip.compress(SST2.read_bytes())[:100])
    with pytest.raises(ValueError, match="broken.tsv.gz: is a damaged gzip file"):
        kbz.data.read_glue_tsv(tmp_path / "broken.tsv.gz")


def test_gzip_text_for_pretraining_and_embedding(tmp_path):
    from keras_bert_zoo.data.line_stream import LineSource
    from keras_bert_zoo.data.pretraining.masking import _source_lines

    def read_lines(path):
        return [line for _, line in LineSource(path)]

    text = DATA / "pretraining" / "sentences.txt"
    packed = _gzip(text, tmp_path / "sentences.txt.gz")
    assert _source_lines(str(packed)) == _source_lines(str(text))
    assert read_lines(packed) == read_lines(text)
    shutil.copy(packed, tmp_path / "no_suffix")  # told by its bytes, not its name
    assert read_lines(tmp_path / "no_suffix") == read_lines(text)
