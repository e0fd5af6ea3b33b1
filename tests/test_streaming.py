"""Streaming inference (issue 48): `kbz embed`, `kbz predict classify` and `kbz predict tag`
read a window at a time, write as they go, and continue after a kill to the same bytes; the
engine's memory is bounded by the window; a changed model is refused; a malformed line is
named after the rows before it are kept; a labelled file's metrics add up over the windows
to the whole file's (the reranker: `test_streaming_rerank.py`).

The model is a tiny random encoder saved as a preset, so nothing trains."""

import json
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

from keras_bert_zoo.cli import main
from keras_bert_zoo.data.line_stream import LineSource, count_lines
from keras_bert_zoo.inference.outputs import NpyRows, StreamOutput, progress_path
from keras_bert_zoo.inference.streaming import stream
from keras_bert_zoo.jobs import embed as embed_job
from keras_bert_zoo.training import bucketed_prediction, packed_prediction

WORDS = (Path(__file__).parent / "data" / "finetune" / "sst2_train_head.tsv").read_text().split()


def _texts(count, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(1, 30))) for _ in range(count)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "texts.txt"
    path.write_text("".join(t + "\n" for t in _texts(1200)))
    return path


def _embed(model, input_path, output, *flags):
    command = ["embed", "--model", str(model), "--input", str(input_path), "--output"]
    return main([*command, str(output), "--window", "300", *flags])


def test_line_source_numbers_hashes_and_counts_lines_like_wc(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("a\r\nb\u2028c\n\nlast".encode())
    source = LineSource(path)
    assert list(source) == [(1, "a"), (2, "b\u2028c"), (3, ""), (4, "last")]
    assert count_lines(path) == source.lines == 4
    again = LineSource(path)
    assert [next(iter(again)) for _ in range(1)] and again.mark()[0] == 1
    assert again.mark()[1] != source.digest()


def test_engine_memory_is_bounded_by_the_window_not_the_input(tmp_path):
    """200,000 lines (about 9 MB of text, 3 MB of vectors) through windows of 1,000: the
    traced peak stays a small fraction of either, which reading the input whole (or holding
    every output) would exceed."""
    path, rows, width = tmp_path / "big.txt", 200_000, 4
    path.write_text("".join(f"line {i} " + "x" * (i % 70) + "\n" for i in range(rows)))
    source = LineSource(path)
    records = ((text, source.mark()) for _, text in source)
    seen = []

    def predict_window(texts):
        seen.append(len(texts))
        return np.array([[len(t), 1, 2, 3] for t in texts], np.float32)

    tracemalloc.start()
    with StreamOutput(tmp_path / "v.npy", {"rows": rows}, NpyRows(rows, width)) as out:
        assert stream(records, predict_window, out, window=1000) == rows
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert max(seen) == 1000 and sum(seen) == rows
    assert peak < 1_500_000, peak  # the text alone is ~9 MB, the vectors 3.2 MB
    vectors = np.load(tmp_path / "v.npy")
    assert vectors.shape == (rows, width)
    np.testing.assert_array_equal(
        vectors[:, 0], [len(f"line {i} " + "x" * (i % 70)) for i in range(rows)]
    )


def test_npy_rows_lay_out_the_file_as_np_save(tmp_path):
    values = np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)
    np.save(tmp_path / "saved.npy", values)
    writer = NpyRows(7, 5)
    writer.open(tmp_path / "rows.npy", None)
    writer.write(4, values[4:])
    writer.write(0, values[:4])
    writer.close()
    assert (tmp_path / "rows.npy").read_bytes() == (tmp_path / "saved.npy").read_bytes()


def test_streamed_embed_equals_embed_texts_per_window(tiny, corpus, tmp_path, monkeypatch):
    windows = []
    window = embed_job.embed_window

    def recording(embedder, preprocessor, texts, *rest):
        windows.append(len(texts))
        return window(embedder, preprocessor, texts, *rest)

    monkeypatch.setattr(embed_job, "embed_window", recording)
    assert _embed(tiny, corpus, tmp_path / "v.npy") == 0
    assert windows == [300] * 4  # never the whole input at once
    vectors = np.load(tmp_path / "v.npy")
    embedder, preprocessor = embed_job.load_embedder(str(tiny))
    texts = corpus.read_text().splitlines()
    expected = np.concatenate(
        [
            embed_job.embed_texts(embedder, preprocessor, texts[i : i + 300])
            for i in (0, 300, 600, 900)
        ]
    )
    np.testing.assert_array_equal(vectors, expected)
    assert not progress_path(tmp_path / "v.npy").exists()  # finished: no record left


class _Stop(Exception):
    pass


def _stop_after(monkeypatch, windows):
    """Makes `kbz embed` fail inside window `windows + 1` (a crash after `windows` commits)."""
    calls, window = [], embed_job.embed_window

    def failing(*args):
        calls.append(1)
        if len(calls) > windows:
            raise _Stop("crash")
        return window(*args)

    monkeypatch.setattr(embed_job, "embed_window", failing)


def fail_prediction(patch, call: int) -> list:
    """Makes the streamed predictions (the tasks' `stream_predictions`) fail at prediction
    pass `call` (a crash after `call - 1` windows are committed), in length buckets or packed
    rows (the classifier's); returns the passes run."""
    calls = []

    def failing(predict):
        def run(*args, **kwargs):
            calls.append(1)
            if len(calls) == call:
                raise _Stop("crash")
            return predict(*args, **kwargs)

        return run

    for module in (bucketed_prediction, packed_prediction):
        patch.setattr(module, "predict", failing(module.predict))
    return calls


def test_a_changed_model_is_refused_and_the_same_one_continues(
    tiny, corpus, tmp_path, monkeypatch, capsys
):
    straight = tmp_path / "straight.npy"
    assert _embed(tiny, corpus, straight) == 0
    output = tmp_path / "v.npy"
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        with pytest.raises(_Stop):
            _embed(tiny, corpus, output)
    assert json.loads(progress_path(output).read_text())["rows"] == 600
    assert not output.exists()  # complete or not at all
    other = save_tiny_preset(tmp_path / "other", seed=1)
    assert _embed(other, corpus, output) == 2  # refused, the difference named
    error = capsys.readouterr().err
    assert "600 rows done" in error and "model/files/model.weights.safetensors/sha256" in error
    assert "vocab.txt" not in error  # the same file in both
    assert _embed(tiny, corpus, output, "--window", "400") == 2
    assert "window: was 300, now 400" in capsys.readouterr().err
    calls, window = [], embed_job.embed_window
    monkeypatch.setattr(embed_job, "embed_window", lambda *a: calls.append(1) or window(*a))
    assert _embed(tiny, corpus, output) == 0
    assert len(calls) == 2  # the two windows not done, nothing again
    assert output.read_bytes() == straight.read_bytes()


def test_a_malformed_line_is_named_after_the_rows_before_it_are_kept(
    tiny, corpus, tmp_path, capsys
):
    lines = corpus.read_bytes().split(b"\n")
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"\n".join(lines[:700] + [b"caf\xe9 latin-1"] + lines[701:]))
    output = tmp_path / "v.npy"
    assert _embed(tiny, broken, output) == 2
    error = capsys.readouterr().err
    assert re.search(r"broken.txt, line 701: is not UTF-8.*700 rows are written", error)
    assert json.loads(progress_path(output).read_text())["rows"] == 700
    fixed = b"\n".join(lines[:700] + ["café latin-1".encode()] + lines[701:])
    broken.write_bytes(fixed)
    assert _embed(tiny, broken, output) == 0  # the lines before it are the same: continues
    (tmp_path / "fixed.txt").write_bytes(fixed)
    assert _embed(tiny, tmp_path / "fixed.txt", tmp_path / "straight.npy") == 0
    # Rows 600-699 were predicted as a window of their own: other length buckets, so equal
    # to float32 rounding; every window after them is the same window as the straight run's.
    vectors, straight = np.load(output), np.load(tmp_path / "straight.npy")
    np.testing.assert_allclose(vectors, straight, atol=1e-6)
    np.testing.assert_array_equal(vectors[900:], straight[900:])


def test_an_input_changed_before_the_resume_point_is_refused(
    tiny, corpus, tmp_path, monkeypatch, capsys
):
    output = tmp_path / "v.npy"
    with monkeypatch.context() as patch:
        _stop_after(patch, 1)
        with pytest.raises(_Stop):
            _embed(tiny, corpus, output)
    changed = tmp_path / "changed.txt"
    changed.write_text("other\n" + "".join(corpus.read_text().splitlines(True)[1:]))
    assert _embed(tiny, changed, output) == 2
    assert "first 300 lines differ" in capsys.readouterr().err
    assert _embed(tiny, changed, output, "--restart") == 0


def _wait_for(condition, process, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end and process.poll() is None:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _committed(output):
    try:
        return json.loads(progress_path(output).read_text())["rows"]
    except (OSError, json.JSONDecodeError, KeyError):
        return 0


def kill_and_resume(command, output, kills=2, seed=0):
    """Runs `command` (a `kbz` argument list), SIGKILLs it `kills` times at random moments
    after a new commit, then runs it to the end."""
    rng = np.random.default_rng(seed)
    full = [sys.executable, "-m", "keras_bert_zoo.cli", *command]
    for _ in range(kills):
        before = _committed(output)
        process = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert _wait_for(lambda b=before: _committed(output) > b, process), "no progress"
        time.sleep(rng.uniform(0.0, 0.3))
        process.send_signal(signal.SIGKILL)
        process.wait()
    subprocess.run(full, check=True, capture_output=True)


@pytest.mark.e2e  # subprocesses killed with SIGKILL, then the same command
def test_killed_embed_resumes_to_the_bytes_of_an_uninterrupted_run(tiny, tmp_path):
    corpus = tmp_path / "texts.txt.gz"
    import gzip

    corpus.write_bytes(gzip.compress("".join(t + "\n" for t in _texts(6000, 1)).encode()))
    command = ["embed", "--model", str(tiny), "--input", str(corpus), "--window", "250"]
    assert main([*command, "--output", str(tmp_path / "straight.npy")]) == 0
    output = tmp_path / "v.npy"
    kill_and_resume([*command, "--output", str(output)], output)
    assert output.read_bytes() == (tmp_path / "straight.npy").read_bytes()
    assert not progress_path(output).exists()


@pytest.mark.e2e  # subprocesses killed with SIGKILL, then the same command
def test_killed_predict_classify_resumes_to_the_bytes_of_the_whole_file_run(tiny, tmp_path):
    """An unlabelled TSV streamed in windows of 200 and killed twice: the same prediction file
    labels as `kbz predict classify` in one window (the whole file at once), probabilities
    equal to float32 rounding (other length buckets)."""
    import keras_bert_zoo as kbz

    model = kbz.from_preset(
        str(tiny), task="classifier", num_classes=3, label_names=["a", "b", "c"]
    )
    preset = kbz.save_preset(model, tmp_path / "classifier")
    tsv = tmp_path / "in.tsv"
    tsv.write_text("id\tsentence\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(_texts(3000, 2))))
    command = ["predict", "classify", "--model", str(preset), "--input", str(tsv)]
    whole = [*command, "--output", str(tmp_path / "whole.tsv"), "--window", "100000"]
    assert main(whole) == 0
    output = tmp_path / "p.tsv"
    kill_and_resume([*command, "--output", str(output), "--window", "200"], output)
    streamed, expected = (
        output.read_text().splitlines(),
        (tmp_path / "whole.tsv").read_text().splitlines(),
    )
    assert streamed[0] == expected[0] and len(streamed) == len(expected) == 3001
    assert [r.split("\t")[:2] for r in streamed] == [r.split("\t")[:2] for r in expected]
    probabilities = lambda rows: np.array([[float(v) for v in r.split("\t")[2:]] for r in rows[1:]])  # noqa: E731
    np.testing.assert_allclose(probabilities(streamed), probabilities(expected), atol=2e-6)


def test_a_second_writer_of_the_same_output_is_refused(tmp_path):
    path = tmp_path / "v.npy"
    with StreamOutput(path, {"rows": 2}, NpyRows(2, 3)) as first:
        with pytest.raises(ValueError, match="being written by another kbz run"):
            StreamOutput(path, {"rows": 2}, NpyRows(2, 3)).__enter__()
        first.write(0, np.ones((2, 3)))
        first.commit(2, (2, "digest"))
    np.testing.assert_array_equal(np.load(path), np.ones((2, 3)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.npy"]  # no record, no partial


def test_streamed_tags_resume_and_equal_the_whole_file(tiny, tmp_path, monkeypatch):
    """A words-only CoNLL file of 300 sentences (a -DOCSTART- line, blank runs) tagged in
    windows of 50 sentences, stopped after two windows and continued: the same file as one
    uninterrupted run, and the same tags as the whole file in one window."""
    import keras_bert_zoo as kbz

    names = ["O", "B-x", "I-x"]
    model = kbz.from_preset(str(tiny), task="tagger", num_tags=3, label_names=names)
    preset = kbz.save_preset(model, tmp_path / "tagger")
    sentences = [t.split() for t in _texts(300, 4)]
    text = "-DOCSTART-\n\n" + "\n\n".join("".join(w + "\n" for w in s) for s in sentences) + "\n\n"
    (tmp_path / "words.conll").write_text(text)
    command = ["predict", "tag", "--model", str(preset), "--input", str(tmp_path / "words.conll")]
    command += ["--no-jit-compile"]
    assert main([*command, "--output", str(tmp_path / "whole.conll"), "--window", "1000"]) == 0
    assert main([*command, "--output", str(tmp_path / "straight.conll"), "--window", "50"]) == 0
    output = tmp_path / "p.conll"
    with monkeypatch.context() as patch:
        fail_prediction(patch, 3)
        with pytest.raises(_Stop):
            main([*command, "--output", str(output), "--window", "50"])
    assert json.loads(progress_path(output).read_text())["rows"] == 100
    assert main([*command, "--output", str(output), "--window", "50"]) == 0
    assert output.read_bytes() == (tmp_path / "straight.conll").read_bytes()
    blocks = [b.split("\n") for b in output.read_text().strip("\n").split("\n\n")]
    assert [[line.split("\t")[0] for line in b] for b in blocks] == sentences
    whole = (tmp_path / "whole.conll").read_text()
    assert [line.split("\t")[1] for line in output.read_text().split("\n") if line] == [
        line.split("\t")[1] for line in whole.split("\n") if line
    ]


def _resumes_to(straight, monkeypatch, task, model, input, window, windows):
    """`run_predict` stopped after `windows` windows and run again gives the file and the
    metrics of `straight`, the uninterrupted run's result."""
    from keras_bert_zoo.jobs.predict import run_predict

    done = Path(straight["files"][0])
    output = done.with_name(f"resumed{done.suffix}")
    with monkeypatch.context() as patch:
        fail_prediction(patch, windows + 1)
        with pytest.raises(_Stop):
            run_predict(task, model, input, output, window=window)
    assert json.loads(progress_path(output).read_text())["rows"] == windows * window
    resumed = run_predict(task, model, input, output, window=window)
    assert resumed == {"files": [str(output)], "metrics": straight["metrics"]}
    assert output.read_bytes() == done.read_bytes()


def test_a_labelled_conll_file_streams_and_its_entity_scores_count_every_window(
    tiny, tmp_path, monkeypatch, capsys
):
    """Tags given: the predictions still stream, and the entity scores added up window by
    window (across a stop and a resume too) are those of the whole file's gold tags against
    the tags written; a tag the model does not know is named with its line."""
    import keras_bert_zoo as kbz
    from keras_bert_zoo import metrics
    from keras_bert_zoo.data.conll_reader import read_conll
    from keras_bert_zoo.jobs.predict import run_predict

    names = ["O", "B-x", "I-x"]
    model = kbz.from_preset(str(tiny), task="tagger", num_tags=3, label_names=names)
    preset = str(kbz.save_preset(model, tmp_path / "tagger"))
    rng = np.random.default_rng(5)
    sentences = [t.split() for t in _texts(200, 5)]
    blocks = ["".join(f"{w}\t{rng.choice(names)}\n" for w in s) for s in sentences]
    (tmp_path / "gold.conll").write_text("\n".join(blocks))
    gold = tmp_path / "gold.conll"
    straight = run_predict("tagger", preset, gold, tmp_path / "s.conll", window=30)
    written = read_conll(tmp_path / "s.conll", tag_names=names)
    expected = metrics.entity_scores([s.tags for s in read_conll(gold).sentences],
                                     [s.tags for s in written.sentences])  # fmt: skip
    assert straight["metrics"] == {k: expected[k] for k in ("precision", "recall", "f1")}
    assert 0 < expected["f1"] < 1 and [s.words for s in written.sentences] == sentences
    _resumes_to(straight, monkeypatch, "tagger", preset, gold, window=30, windows=3)
    text = gold.read_text()
    line = next(n for n, b in enumerate(text.split("\n"), 1) if b.endswith("\tB-x"))
    unknown = text.replace("\tB-x\n", "\tB-y\n", 1)
    (tmp_path / "unknown.conll").write_text(unknown)
    command = ["predict", "tag", "--model", preset, "--input", str(tmp_path / "unknown.conll")]
    assert main([*command, "--output", str(tmp_path / "u.conll")]) == 2
    assert re.search(rf"unknown.conll, line {line}: .*B-y", capsys.readouterr().err)


@pytest.mark.parametrize("classes", [2, 3])  # binary F1, macro F1
def test_a_labelled_tsv_streams_and_its_scores_count_every_window(
    tiny, tmp_path, monkeypatch, capsys, classes
):
    """Labels given: the predictions still stream, and accuracy and F1 from the confusion
    matrix added up window by window (across a stop and a resume too) are those of the whole
    file's labels against the labels written; an unknown label is named with its line."""
    import keras_bert_zoo as kbz
    from keras_bert_zoo import metrics
    from keras_bert_zoo.jobs.predict import run_predict

    names = ["neg", "pos", "mixed"][:classes]
    model = kbz.from_preset(str(tiny), task="classifier", num_classes=classes, label_names=names)
    preset = str(kbz.save_preset(model, tmp_path / "classifier"))
    rng = np.random.default_rng(classes)
    rows = [f"{t}\t{rng.choice(names)}\n" for t in _texts(500, classes)]
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(rows))
    straight = run_predict("classifier", preset, tsv, tmp_path / "s.tsv", window=120)
    gold = [names.index(r.rstrip("\n").split("\t")[1]) for r in rows]
    written = [
        names.index(r.split("\t")[1]) for r in (tmp_path / "s.tsv").read_text().split("\n")[1:-1]
    ]
    average = "binary" if classes == 2 else "macro"
    expected = {"accuracy": metrics.accuracy(gold, written),
                "f1": metrics.f1_score(gold, written, average=average)}  # fmt: skip
    assert straight["metrics"] == expected and 0 < expected["accuracy"] < 1
    _resumes_to(straight, monkeypatch, "classifier", preset, tsv, window=120, windows=2)
    rows[9] = rows[9].rsplit("\t", 1)[0] + "\tother\n"  # file line 11
    (tmp_path / "unknown.tsv").write_text("sentence\tlabel\n" + "".join(rows))
    command = ["predict", "classify", "--model", preset, "--input", str(tmp_path / "unknown.tsv")]
    assert main([*command, "--output", str(tmp_path / "u.tsv")]) == 2
    assert re.search(r"unknown.tsv, line 11: label 'other' is not one of", capsys.readouterr().err)


def test_a_regression_file_with_labels_streams_and_its_correlations_count_every_row(
    tiny, tmp_path, monkeypatch, capsys
):
    """A regression's labels given: the scores still stream, and Pearson and Spearman,
    computed once the file is complete from its labels and the scores written (across a stop
    and a resume too), are those of the whole file's labels against the scores written; a
    label that is no number is named with its line, the windows before it kept."""
    import keras_bert_zoo as kbz
    from keras_bert_zoo import metrics
    from keras_bert_zoo.jobs.predict import run_predict

    model = kbz.from_preset(str(tiny), task="classifier", num_classes=1)
    preset = str(kbz.save_preset(model, tmp_path / "regression"))
    rng = np.random.default_rng(5)
    rows = [f"{t}\t{rng.uniform(0, 5):.3f}\n" for t in _texts(400, 5)]
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(rows))
    straight = run_predict("classifier", preset, tsv, tmp_path / "s.tsv", window=120)
    gold = [float(r.rstrip("\n").split("\t")[1]) for r in rows]
    written = [float(r.split("\t")[1]) for r in (tmp_path / "s.tsv").read_text().split("\n")[1:-1]]
    expected = {"pearson": metrics.pearson(gold, written),
                "spearman": metrics.spearman(gold, written)}  # fmt: skip
    assert straight["metrics"] == expected and len(written) == 400
    _resumes_to(straight, monkeypatch, "classifier", preset, tsv, window=120, windows=2)
    rows[9] = rows[9].rsplit("\t", 1)[0] + "\thigh\n"  # file line 11
    (tmp_path / "words.tsv").write_text("sentence\tlabel\n" + "".join(rows))
    command = ["predict", "classify", "--model", preset, "--input", str(tmp_path / "words.tsv")]
    assert main([*command, "--output", str(tmp_path / "u.tsv"), "--window", "5"]) == 2
    assert re.search(r"words.tsv, line 11: label 'high' is not a number", capsys.readouterr().err)
    assert json.loads(progress_path(tmp_path / "u.tsv").read_text())["rows"] == 9  # all before
