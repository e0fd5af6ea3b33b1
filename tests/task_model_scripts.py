"""Each task model's short script (load, fit, predict, save, reload) on the bundled samples,
shared by the TensorFlow, JAX and PyTorch tiers (`test_task_models.py`,
`test_backend_jax_task_models.py`, `test_backend_torch_task_models.py`): the same calls on
every backend, each returning what its test compares.

The models are the 1-layer tiny BERT on the real uncased vocabulary (`conftest.TINY_UNCASED`),
so the checks are about behaviour (shapes, one tag per word, answers inside the context,
normalised vectors, the reload giving the same outputs), not accuracy.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

import keras_bert_zoo as kbz

DATA = Path(__file__).parent / "data" / "finetune"
FIT = dict(epochs=1, verbose=0)


def sst2(count: int = 48) -> tuple[list, list]:
    rows = [line.split("\t") for line in (DATA / "sst2_train_head.tsv").read_text().splitlines()]
    rows = rows[1 : count + 1]
    return [r[0].strip() for r in rows], ["positive" if r[1] == "1" else "negative" for r in rows]


def wnut(count: int = 32) -> tuple[list, list]:
    sentences = kbz.data.read_conll(DATA / "wnut17_train_head.conll").sentences[:count]
    return [s.words for s in sentences], [s.tags for s in sentences]


def squad(count: int = 16) -> tuple[dict, dict]:
    questions, contexts, texts, starts = [], [], [], []
    for paragraph in json.loads((DATA / "squad_v1.1_sample.json").read_text())["data"][0][
        "paragraphs"
    ]:
        for qa in paragraph["qas"][:4]:
            questions.append(qa["question"])
            contexts.append(paragraph["context"])
            texts.append(qa["answers"][0]["text"])
            starts.append(qa["answers"][0]["answer_start"])
    n = slice(0, count)
    x = {"question": questions[n], "context": contexts[n]}
    return x, {"text": texts[n], "answer_start": starts[n]}


def reload(model, path: Path):
    model.save(path)
    return kbz.load_model(path)


def classifier_script(preset, tmp_path: Path) -> dict:
    texts, labels = sst2()
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    history = classifier.fit(x=texts, y=labels, batch_size=8, **FIT)
    scores = classifier.predict(texts[:5])
    reloaded = reload(classifier, tmp_path / "classifier.keras")
    return dict(
        history=history.history,
        scores=np.asarray(scores),
        names=classifier.classify(texts[:5]),
        reloaded_scores=np.asarray(reloaded.predict(texts[:5])),
        reloaded_names=reloaded.classify(texts[:5]),
        label_names=reloaded.task_config["label_names"],
        metrics=classifier.evaluate(texts[:16], labels[:16]),
    )


def tagger_script(preset, tmp_path: Path) -> dict:
    words, tags = wnut()
    names = kbz.data.tag_vocabulary(t for row in tags for t in row)
    tagger = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=64)
    history = tagger.fit(x=words, y=tags, batch_size=8, **FIT)
    reloaded = reload(tagger, tmp_path / "tagger.keras")
    return dict(
        history=history.history,
        words=words[:4],
        tags=tagger.tag(words[:4]),
        reloaded_tags=reloaded.tag(words[:4]),
        names=names,
        metrics=tagger.evaluate(words[:8], tags[:8]),
    )


def question_answerer_script(preset, tmp_path: Path) -> dict:
    x, y = squad()
    qa = kbz.BertQuestionAnswerer.from_preset(
        preset, sequence_length=64, doc_stride=32, max_query_length=24
    )
    history = qa.fit(x=x, y=y, batch_size=8, **FIT)
    answers = qa.answer(x["question"][:3], x["context"][:3])
    reloaded = reload(qa, tmp_path / "qa.keras")
    return dict(
        history=history.history,
        contexts=x["context"][:3],
        answers=answers,
        reloaded_answers=reloaded.answer(x["question"][:3], x["context"][:3]),
        nbest=qa.answer(x["question"][:1], x["context"][:1], n_best=True),
        options=reloaded.options,
        metrics=qa.evaluate(x, y),
    )


def embedder_script(preset, tmp_path: Path) -> dict:
    x, y = squad()
    embedder = kbz.BertEmbedder.from_preset(preset, sequence_length=64)
    history = embedder.fit(x=(x["question"], y["text"]), batch_size=4, **FIT)
    vectors = embedder.encode(x["question"][:5])
    reloaded = reload(embedder, tmp_path / "embedder.keras")
    return dict(
        history=history.history,
        vectors=vectors,
        reloaded_vectors=reloaded.encode(x["question"][:5]),
        metrics=embedder.evaluate(x=(x["question"], y["text"])),
    )


def reranker_script(preset, tmp_path: Path) -> dict:
    x, _ = squad()
    queries, contexts = x["question"], x["context"]
    others = [contexts[(i + 4) % len(contexts)] for i in range(len(contexts))]
    pairs_q = [q for q in queries for _ in range(2)]
    pairs_p = [p for pair in zip(contexts, others, strict=True) for p in pair]
    labels = [1, 0] * len(queries)
    reranker = kbz.BertReranker.from_preset(preset, sequence_length=64)
    history = reranker.fit(x=(pairs_q, pairs_p), y=labels, batch_size=8, **FIT)
    scores = reranker.score(pairs_q[:4], pairs_p[:4])
    reloaded = reload(reranker, tmp_path / "reranker.keras")
    return dict(
        history=history.history,
        scores=scores,
        reloaded_scores=reloaded.score(pairs_q[:4], pairs_p[:4]),
        ranked=reranker.rank(queries[0], [contexts[0], others[0]]),
        metrics=reranker.evaluate(x=(pairs_q, pairs_p), y=labels),
    )


def check_classifier(result: dict) -> None:
    assert np.isfinite(result["history"]["loss"]).all()
    assert result["scores"].shape == (5, 2)
    assert result["label_names"] == ["negative", "positive"]  # learnt from `y`, kept
    assert set(result["names"]) <= {"negative", "positive"}
    np.testing.assert_allclose(result["reloaded_scores"], result["scores"], atol=1e-5)
    assert result["reloaded_names"] == result["names"]
    assert set(result["metrics"]) == {"accuracy", "f1"}


def check_tagger(result: dict) -> None:
    assert np.isfinite(result["history"]["loss"]).all()
    assert [len(t) for t in result["tags"]] == [len(w) for w in result["words"]]
    assert {t for row in result["tags"] for t in row} <= set(result["names"])
    assert result["reloaded_tags"] == result["tags"]
    assert set(result["metrics"]) == {"precision", "recall", "f1"}


def check_question_answerer(result: dict) -> None:
    assert np.isfinite(result["history"]["loss"]).all()
    assert all(a in c for a, c in zip(result["answers"], result["contexts"], strict=True))
    assert result["reloaded_answers"] == result["answers"]
    best = result["nbest"][0]
    assert best[0]["text"] == result["answers"][0] and "probability" in best[0]
    assert result["options"] == {"doc_stride": 32, "max_query_length": 24}
    assert set(result["metrics"]) == {"exact_match", "f1"}


def check_embedder(result: dict) -> None:
    assert np.isfinite(result["history"]["loss"]).all()
    assert result["vectors"].shape == (5, 32) and result["vectors"].dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(result["vectors"], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(result["reloaded_vectors"], result["vectors"], atol=1e-5)
    assert set(result["metrics"]) == {"recall@1", "recall@5", "mrr"}


def check_reranker(result: dict) -> None:
    assert np.isfinite(result["history"]["loss"]).all()
    assert result["scores"].shape == (4,)
    np.testing.assert_allclose(result["reloaded_scores"], result["scores"], atol=1e-5)
    ranked = [score for _, score in result["ranked"]]
    assert ranked == sorted(ranked, reverse=True)
    assert set(result["metrics"]) == {"mrr_at_10", "recall_at_1", "recall_at_10"}


SCRIPTS = {
    "classifier": (classifier_script, check_classifier),
    "tagger": (tagger_script, check_tagger),
    "question_answerer": (question_answerer_script, check_question_answerer),
    "embedder": (embedder_script, check_embedder),
    "reranker": (reranker_script, check_reranker),
}


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


@pytest.mark.parametrize("task", sorted(SCRIPTS))
def test_task_script_on_raw_data(preset, tmp_path, task):
    """Imported by each backend's test module, which runs it on that backend."""
    script, check = SCRIPTS[task]
    check(script(preset, tmp_path))
