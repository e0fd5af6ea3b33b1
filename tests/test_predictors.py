"""`jobs.predictors` (issue 48), what `kbz embed`, `kbz predict` and the Apache Beam handler
share: raw inputs in memory give the tags, rerank scores and answers that `kbz predict`
writes for a file of the same inputs. Tiny random task presets; nothing trains."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.jobs.predictors import load_predictor

DATA = Path(__file__).parent / "data" / "finetune"
TASKS = {
    "tagger": {"num_tags": 3, "label_names": ["O", "B-person", "I-person"]},
    "reranker": {},
    "question_answerer": {},
}


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    root = tmp_path_factory.mktemp("predictors")
    encoder = save_tiny_preset(root / "encoder")
    return {
        task: kbz.save_preset(kbz.from_preset(str(encoder), task=task, **kwargs), root / task)
        for task, kwargs in TASKS.items()
    }


def _predict(task, model, path, output):
    command = ["predict", task, "--model", str(model), "--input", str(path)]
    assert main([*command, "--output", str(output), "--no-jit-compile"]) == 0


def test_tags_equal_kbz_predict_tag(presets, tmp_path):
    sentences = [
        line.split("\t")[0] for line in (DATA / "wnut17_dev_head.conll").read_text().split("\n")
    ]
    texts = [
        " ".join(s.split()) for s in " ".join(w or "\n" for w in sentences).split("\n") if s.strip()
    ][:20]
    (tmp_path / "w.conll").write_text("\n\n".join("\n".join(t.split()) for t in texts) + "\n")
    _predict("tag", presets["tagger"], tmp_path / "w.conll", tmp_path / "p.conll")
    blocks = (tmp_path / "p.conll").read_text().strip("\n").split("\n\n")
    expected = [[line.split("\t")[1] for line in b.split("\n")] for b in blocks]
    predictor = load_predictor(presets["tagger"], "tagger")
    results = [predictor.decode(o) for o in predictor(texts)]
    assert [r["words"] for r in results] == [t.split() for t in texts]
    assert [r["tags"] for r in results] == expected


def test_rerank_scores_equal_kbz_predict_rerank(presets, tmp_path):
    rows = [
        line.split("\t") for line in (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:21]
    ]
    pairs = [(f"query {i % 4}", sentence) for i, (sentence, _) in enumerate(rows)]
    (tmp_path / "c.tsv").write_text("query\tpassage\n" + "".join(f"{q}\t{p}\n" for q, p in pairs))
    _predict("rerank", presets["reranker"], tmp_path / "c.tsv", tmp_path / "s.tsv")
    expected = [
        float(line.rsplit("\t", 1)[1]) for line in (tmp_path / "s.tsv").read_text().splitlines()[1:]
    ]
    predictor = load_predictor(presets["reranker"], "reranker")
    scores = [predictor.decode(o)["score"] for o in predictor(pairs)]
    np.testing.assert_allclose(scores, expected, atol=2e-6)


def test_answers_equal_kbz_predict_qa(presets, tmp_path):
    squad = json.loads((DATA / "squad_v1.1_sample.json").read_text())
    _predict(
        "qa",
        presets["question_answerer"],
        DATA / "squad_v1.1_sample.json",
        tmp_path / "predictions.json",
    )
    expected = json.loads((tmp_path / "predictions.json").read_text())
    nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
    questions = [
        (qa["id"], {"question": qa["question"], "context": paragraph["context"]})
        for article in squad["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ][:12]
    predictor = load_predictor(presets["question_answerer"], "question_answerer")
    results = [predictor.decode(o) for o in predictor([q for _, q in questions])]
    assert [r["answer"] for r in results] == [expected[i] for i, _ in questions]
    assert [r["nbest"][0]["text"] for r in results] == [nbest[i][0]["text"] for i, _ in questions]
