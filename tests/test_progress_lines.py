"""Progress a log shows (keras_bert_zoo/training/progress.py): where standard output is not a
terminal (here pytest's capture, as a file), fine-tuning and embedding write a plain line at
least every `LOG_EVERY_SECONDS`: what is done of the total, the rate, the time left and, while
training, the running loss."""

import re
import time
from pathlib import Path

from conftest import save_tiny_preset

from keras_bert_zoo.cli import main
from keras_bert_zoo.training import progress

DATA = Path(__file__).parent / "data" / "finetune"


class Clock:
    """`time.monotonic` for `progress`, moved by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_log_lines_come_at_the_interval_with_rate_and_time_left(monkeypatch, capsys):
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    lines = progress.LogLines("embed", 1000, "rows", every=60)
    for _ in range(10):  # 100 rows every 25 s: a line at 75 s and at 150 s (60 s apart each)
        clock.now += 25
        lines.advance(100)
    shown = capsys.readouterr().out.splitlines()
    assert shown == [
        "embed: rows 300/1000 (30%) - 4.0 rows/s - 2m55s left",
        "embed: rows 600/1000 (60%) - 4.0 rows/s - 1m40s left",
        "embed: rows 900/1000 (90%) - 4.0 rows/s - 25s left",
    ]
    silent = progress.LogLines("embed", 10, "rows", every=0, enabled=False)
    silent.advance(5)
    assert capsys.readouterr().out == ""


def test_finetune_to_a_file_writes_step_lines_with_the_running_loss(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", 0.0)  # a line after every step
    train = tmp_path / "train.tsv"
    train.write_text("".join((DATA / "sst2_train_head.tsv").open().readlines()[:65]))
    command = ["finetune", "classify", "--preset", str(save_tiny_preset(tmp_path / "p"))]
    command += ["--train", str(train), "--validation", str(train)]
    command += ["--output", str(tmp_path / "out"), "--epochs", "2", "--batch-size", "16"]
    command += ["--sequence-length", "32", "--no-jit-compile", "--no-export"]
    assert main(command) == 0
    out = capsys.readouterr().out
    steps = re.findall(r"^training: steps (\d+)/(\d+) \(\d+%\) - [\d.]+ steps/s - \S+ left - "
                       r"loss \d\.\d{4}$", out, re.MULTILINE)  # fmt: skip
    # 64 examples at batch 16: 4 steps an epoch, counted over the run
    assert [int(done) for done, total in steps] == list(range(1, 9)), out
    assert {total for _, total in steps} == {"8"}
    assert re.search(r"^validation: rows 64/64 \(100%\)", out, re.MULTILINE)
    assert "\x1b" not in out and "\r" not in out  # plain lines, no bar


def test_embed_to_a_file_writes_row_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", 0.0)
    texts = [line.rsplit("\t", 1)[0] for line in (DATA / "sst2_train_head.tsv").open()][1:41]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    argv = ["embed", "--model", str(save_tiny_preset(tmp_path / "p")), "--input"]
    argv += [str(tmp_path / "in.txt"), "--output", str(tmp_path / "v.npy")]
    assert main([*argv, "--batch-size", "16", "--sequence-length", "32"]) == 0
    shown = r"^embed \[keras float32\]: rows (\d+)/40 "  # the runtime named, as the summary's
    rows = [int(n) for n in re.findall(shown, capsys.readouterr().out, re.M)]
    assert rows == sorted(rows) and rows[-1] == 40 and len(rows) >= 3, rows


def test_work_without_a_count_shows_the_time_it_takes(monkeypatch, capsys):
    seconds = 0.05
    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", seconds)
    with progress.logged_while("export"):
        time.sleep(seconds * 5)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2 and all(re.fullmatch(r"export: working, \d+s so far", x) for x in lines)
    with progress.logged_while("export", enabled=False):
        time.sleep(seconds * 3)
    assert capsys.readouterr().out == ""


def test_a_pass_counts_in_the_input_rows_it_stands_for():
    counted = []
    with progress.rows_counted_by(counted.append, 3):  # 3 sentences, 7 windows of tokens
        advance = progress.rows_counter("tag", 7)
        for rows in (2, 2, 2, 1):
            advance(rows)
    assert sum(counted) == 3 and all(c > 0 for c in counted)
    with progress.rows_counted_by(counted.append, 5):  # one row per record: as they come
        assert progress.rows_counter("classify", 5) == counted.append


def test_a_stream_counts_its_records_not_the_rows_of_their_passes(tmp_path, monkeypatch):
    """A record predicted as several rows (a text split into windows of tokens): the progress
    over the input counts each record once, so never runs past its total."""
    import numpy as np

    from keras_bert_zoo.inference.outputs import NpyRows, StreamOutput
    from keras_bert_zoo.inference.streaming import Progress, stream

    counted, advance = [], Progress.advance
    monkeypatch.setattr(
        Progress, "advance", lambda self, rows: counted.append(rows) or advance(self, rows)
    )

    def predict_window(records):  # three rows per record, counted a batch of 4 at a time
        count = progress.rows_counter("windows", 3 * len(records))
        for begin in range(0, 3 * len(records), 4):
            count(min(4, 3 * len(records) - begin))
        return np.ones((len(records), 1), np.float32)

    records = ((i, (i + 1, "")) for i in range(25))
    with StreamOutput(tmp_path / "v.npy", {}, NpyRows(25, 1)) as out:
        assert stream(records, predict_window, out, 10, Progress(25, 0, "windows")) == 25
    assert sum(counted) == 25 and len(counted) > 3  # batches counted, not only windows' ends
