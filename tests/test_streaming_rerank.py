"""`kbz predict rerank` streamed (issue 48): the scores file, the ranked lists and the metrics
of a pairs TSV with memory bounded by the window; the same files and metrics as the whole-file
path (`prediction_files.write_scores`, `RerankingTask.metrics`); continued after a stop or a kill to
the bytes of an uninterrupted run; a malformed line named after the pairs before it are kept.

The model is a tiny random reranker saved as a preset, so nothing trains."""

import json
import os
import re
import tracemalloc

import numpy as np
import pytest
from conftest import save_tiny_preset
from test_streaming import _Stop, _texts, fail_prediction, kill_and_resume

from keras_bert_zoo import ranking_metrics
from keras_bert_zoo.cli import main
from keras_bert_zoo.data.rerank_reader import read_ranking_tsv
from keras_bert_zoo.inference.outputs import progress_path
from keras_bert_zoo.jobs.predict import run_predict
from keras_bert_zoo.jobs.predictors import load_predictor
from keras_bert_zoo.tasks.reranker import stream as predict_stream
from keras_bert_zoo.tasks.reranker.prediction_files import ranked_path, write_scores
from keras_bert_zoo.tasks.reranker.ranked_stream import pairs_path
from keras_bert_zoo.tasks.reranker.task import RerankingTask


def _pairs_tsv(path, count, seed=0, labelled=True, queries=40):
    """`count` pairs of `queries` queries in random order (a query's pairs scattered over the
    file), a blank line now and then; every query has a relevant passage but the last."""
    rng = np.random.default_rng(seed)
    texts = _texts(count + queries, seed)
    lines = ["query\tpassage" + ("\tlabel" if labelled else "")]
    for i in range(count):
        query = int(rng.integers(queries)) if i >= queries else i
        relevant = query < queries - 1 and (i == query or rng.random() < 0.2)
        label = f"\t{int(relevant)}" if labelled else ""
        lines.append(f"q{query} {texts[query]}\t{texts[queries + i]}{label}")
        if i % 97 == 5:
            lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    import keras_bert_zoo as kbz

    tiny = save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")
    model = kbz.from_preset(str(tiny), task="reranker")
    return kbz.save_preset(model, tmp_path_factory.mktemp("reranker") / "preset")


def _rerank(model, input_path, output, window, *flags):
    command = ["predict", "rerank", "--model", str(model), "--input", str(input_path)]
    return main([*command, "--output", str(output), "--window", str(window), *flags])


def test_one_window_equals_the_whole_file_path_and_metrics(reranker, tmp_path):
    tsv = _pairs_tsv(tmp_path / "pairs.tsv", 600)
    result = run_predict("reranker", str(reranker), tsv, tmp_path / "p.tsv", window=10_000)
    assert (
        not pairs_path(tmp_path / "p.tsv").exists()
        and not progress_path(tmp_path / "p.tsv").exists()
    )
    dataset = read_ranking_tsv(tsv, labels_optional=True)
    predictor = load_predictor(str(reranker), "reranker")
    scores = np.asarray(predictor([(p.query, p.passage) for p in dataset.pairs]), np.float64)
    write_scores(tmp_path / "whole.tsv", dataset, scores)
    for name in ("p.tsv", "p.ranked.tsv"):
        assert (tmp_path / name).read_bytes() == (
            tmp_path / name.replace("p", "whole", 1)
        ).read_bytes()
    expected = ranking_metrics.ranking_scores(dataset.queries, dataset.labels, scores, 10)
    assert result["metrics"] == expected and 0 < expected["mrr_at_10"] < 1
    # A file without labels: the same scores, no metrics, no label column in the lists.
    bare = _pairs_tsv(tmp_path / "bare.tsv", 600, labelled=False)
    result = run_predict("reranker", str(reranker), bare, tmp_path / "b.tsv", window=250)
    assert result["metrics"] == {}
    assert (
        ranked_path(tmp_path / "b.tsv").read_text().split("\n")[0] == "query\trank\tscore\tpassage"
    )
    got = [float(r.split("\t")[-1]) for r in (tmp_path / "b.tsv").read_text().splitlines()[1:]]
    np.testing.assert_allclose(got, scores, atol=2e-6)


def test_a_stopped_rerank_continues_to_the_bytes_of_an_uninterrupted_run(
    reranker, tmp_path, monkeypatch
):
    tsv = _pairs_tsv(tmp_path / "pairs.tsv", 900, seed=1)
    assert _rerank(reranker, tsv, tmp_path / "straight.tsv", 200) == 0
    output = tmp_path / "p.tsv"
    with monkeypatch.context() as patch:
        fail_prediction(patch, 3)
        with pytest.raises(_Stop):
            _rerank(reranker, tsv, output, 200)
    assert json.loads(progress_path(output).read_text())["rows"] == 400
    assert not output.exists() and not ranked_path(output).exists()
    calls, predict = [], predict_stream.packed_prediction.predict_outputs
    monkeypatch.setattr(
        predict_stream.packed_prediction,
        "predict_outputs",
        lambda *a, **k: calls.append(1) or predict(*a, **k),
    )
    assert _rerank(reranker, tsv, output, 200) == 0
    assert len(calls) == 3  # windows 3 to 5 (900 pairs), none again
    for name in ("p.tsv", "p.ranked.tsv"):
        assert (tmp_path / name).read_bytes() == (
            tmp_path / name.replace("p", "straight", 1)
        ).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["pairs.tsv", "p.tsv", "p.ranked.tsv", "straight.tsv", "straight.ranked.tsv"]
    )  # no table, no record, no partial left


def _traced_rerank(tmp_path, rows: int, window: int):
    """`(traced peak bytes, windows' sizes)` of `stream_scores` on `rows` generated pairs,
    the model replaced by the passages' lengths (its inputs are not the subject)."""
    path = tmp_path / f"big{rows}.tsv"
    lines = (f"q{i % 997} what {i % 13}\tpassage {i} " + "y" * (50 + i % 40) for i in range(rows))
    path.write_text("query\tpassage\n" + "".join(line + "\n" for line in lines))
    seen = []

    def arrays(preprocessor, queries, passages):
        seen.append(len(queries))
        lengths = np.array([len(p) for p in passages])
        return {"padding_mask": np.zeros((len(queries), 8), bool), "n": lengths}

    class Preprocessor:
        sequence_length = 8

    predictor = type(
        "P", (), {"network": None, "preprocessor": Preprocessor, "batch_size": 8, "packing": False}
    )
    job = RerankingTask.__new__(RerankingTask)  # scores only: no tokenizer needed
    job.top_k = 10
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(predict_stream, "packed_arrays", arrays)
        patch.setattr(
            predict_stream.packed_prediction, "predict_outputs", lambda n, x, *a, **k: x["n"]
        )
        patch.setattr(os, "fsync", lambda fd: None)  # durability is not the subject: speed
        tracemalloc.start()
        output = tmp_path / f"s{rows}.tsv"
        identity = {"model": {"preset": "fake"}}
        arguments = (path, output, window, False, identity, ranked_path(output))
        result = predict_stream.stream_scores(job, predictor, *arguments)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert result == ([output, ranked_path(output)], {})
    assert sum(seen) == rows
    return peak, seen


def test_rerank_memory_is_bounded_by_the_window_not_the_input(tmp_path):
    """12,000 and 48,000 pairs (1.2 and 4.8 MB of text) through windows of 500: the traced peak
    (Python's allocations; SQLite's page cache is its own) is the same, where holding the
    pairs (or their scores) would grow it four times."""
    small, _ = _traced_rerank(tmp_path, 12_000, 500)
    peak, seen = _traced_rerank(tmp_path, 48_000, 500)
    assert max(seen) == 500 and peak < 1.1 * small, (peak, small)
    scored = (tmp_path / "s48000.tsv").read_text().splitlines()
    assert len(scored) == 48_001 and scored[5].endswith(f"\t{len('passage 4 ' + 'y' * 54)}.000000")
    ranked = ranked_path(tmp_path / "s48000.tsv").read_text().splitlines()
    assert len(ranked) == 48_001 and ranked[1].startswith("q0 what 0\t1\t")


def test_a_malformed_pair_is_named_after_the_pairs_before_it_are_kept(reranker, tmp_path, capsys):
    tsv = _pairs_tsv(tmp_path / "pairs.tsv", 5000, seed=2, queries=300)
    lines = tsv.read_text().split("\n")
    number = 2600  # a file line past two windows of 1000 and then some
    fields = lines[number - 1].split("\t")
    broken = tmp_path / "broken.tsv"
    broken.write_text("\n".join(lines[: number - 1] + ["\t".join(fields[:2])] + lines[number:]))
    before = sum(1 for line in lines[1 : number - 1] if line)
    output = tmp_path / "p.tsv"
    early = tmp_path / "early.tsv"  # the first pair broken: nothing done, nothing to continue
    early.write_text("\n".join(lines[:1] + ["\t".join(fields[:2])] + lines[1:]))
    assert _rerank(reranker, early, output, 1000) == 2
    assert "early.tsv, line 2: has 2 TAB-separated columns" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.tsv", "early.tsv", "pairs.tsv"]
    assert _rerank(reranker, broken, output, 1000) == 2
    error = capsys.readouterr().err
    assert re.search(rf"broken.tsv, line {number}: has 2 TAB-separated columns, expected 3", error)
    assert f"{before} rows are written" in error
    assert json.loads(progress_path(output).read_text())["rows"] == before
    assert output.with_name(".p.tsv.partial").read_text().count("\n") == before + 1
    broken.write_text("\n".join(lines))  # fixed
    assert _rerank(reranker, broken, output, 1000) == 0
    assert _rerank(reranker, tsv, tmp_path / "straight.tsv", 1000) == 0
    # The pairs from the failed window on were a window of their own: other length buckets,
    # so equal to float32 rounding.
    got, expected = (
        [r.split("\t") for r in (tmp_path / name).read_text().splitlines()]
        for name in ("p.tsv", "straight.tsv")
    )
    assert [r[:-1] for r in got] == [r[:-1] for r in expected]
    np.testing.assert_allclose(
        [float(r[-1]) for r in got[1:]], [float(r[-1]) for r in expected[1:]], atol=2e-6
    )


def test_packing_flags_give_the_scores_of_length_buckets(reranker, tmp_path, monkeypatch):
    """`kbz predict rerank --packing` reads each pair at its [CLS] in rows of several pairs:
    the scores of `--no-packing` (length buckets) within float32 rounding."""
    from keras_bert_zoo.training import packed_prediction

    packed_calls = []
    original = packed_prediction.predict
    monkeypatch.setattr(
        packed_prediction, "predict", lambda *a, **k: packed_calls.append(1) or original(*a, **k)
    )
    tsv = _pairs_tsv(tmp_path / "pairs.tsv", 300, seed=3)
    assert _rerank(reranker, tsv, tmp_path / "b.tsv", 120, "--no-packing") == 0
    assert not packed_calls
    assert _rerank(reranker, tsv, tmp_path / "p.tsv", 120, "--packing") == 0
    assert len(packed_calls) == 3  # one per window
    got, expected = (
        [r.split("\t") for r in (tmp_path / name).read_text().splitlines()]
        for name in ("p.tsv", "b.tsv")
    )
    assert [r[:-1] for r in got] == [r[:-1] for r in expected] and len(got) == 301
    np.testing.assert_allclose(
        [float(r[-1]) for r in got[1:]], [float(r[-1]) for r in expected[1:]], atol=1e-5
    )


@pytest.mark.e2e  # subprocesses killed with SIGKILL, then the same command
def test_killed_rerank_resumes_to_the_bytes_of_an_uninterrupted_run(reranker, tmp_path):
    tsv = _pairs_tsv(tmp_path / "pairs.tsv", 4000, seed=3, queries=200)
    command = [
        "predict",
        "rerank",
        "--model",
        str(reranker),
        "--input",
        str(tsv),
        "--window",
        "250",
    ]
    assert main([*command, "--output", str(tmp_path / "straight.tsv")]) == 0
    output = tmp_path / "p.tsv"
    kill_and_resume([*command, "--output", str(output)], output)
    for name in ("p.tsv", "p.ranked.tsv"):
        assert (tmp_path / name).read_bytes() == (
            tmp_path / name.replace("p", "straight", 1)
        ).read_bytes()
    assert not progress_path(output).exists() and not pairs_path(output).exists()
