"""`kbz predict` on new data: unlabelled files of every task, metrics only with labels, and
warnings for collapsed predictions and truncated texts (issue 30, items 1 and 10).

The models are tiny random task presets saved in Python, so no test trains.
"""

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.finetuning.prediction_files import warn_if_all_outside, warn_if_collapsed

DATA = Path(__file__).parent / "data" / "finetune"
TASK_KWARGS = {
    "classifier": {"num_classes": 2, "label_names": ["negative", "positive"]},
    "tagger": {"num_tags": 3, "label_names": ["O", "B-person", "I-person"]},
    "question_answerer": {},
}


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """A tiny random classifier, tagger and question answerer, each saved as a preset."""
    root = tmp_path_factory.mktemp("predict")
    encoder_preset = save_tiny_preset(root / "encoder")
    saved = {}
    for task, kwargs in TASK_KWARGS.items():
        model = kbz.from_preset(str(encoder_preset), task=task, **kwargs)
        saved[task] = kbz.save_preset(model, root / task)
    return saved


def _predict(task, model, input_path, output, *extra):
    return main(
        ["predict", task, "--model", str(model), "--input", str(input_path), "--output",
         str(output), "--no-jit-compile", *extra]
    )  # fmt: skip


def test_predict_tags_a_words_only_conll_file(presets, tmp_path, capsys):
    words = tmp_path / "words.conll"
    words.write_text("Ada\nLovelace\nwrote\n\nParis\nis\nbig\n")
    assert _predict("tag", presets["tagger"], words, tmp_path / "p.conll") == 0
    assert capsys.readouterr().out.strip() == f"Wrote {tmp_path / 'p.conll'}"  # no metrics
    blocks = [b.split("\n") for b in (tmp_path / "p.conll").read_text().strip().split("\n\n")]
    assert [[line.split("\t")[0] for line in b] for b in blocks] == [
        ["Ada", "Lovelace", "wrote"],
        ["Paris", "is", "big"],
    ]
    assert {line.split("\t")[1] for b in blocks for line in b} <= {"O", "B-person", "I-person"}
    # with tags the same command also scores them
    tagged = tmp_path / "tagged.conll"
    tagged.write_text("Ada\tB-person\nLovelace\tI-person\nwrote\tO\n")
    assert _predict("tag", presets["tagger"], tagged, tmp_path / "q.conll") == 0
    assert set(json.loads(capsys.readouterr().out.split("\n", 1)[1])) == {
        "precision",
        "recall",
        "f1",
    }


def test_predict_answers_squad_questions_without_answers(presets, tmp_path, capsys):
    document = json.loads((DATA / "squad_v1.1_sample.json").read_text())
    for article in document["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                del qa["answers"]
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps(document))
    output = tmp_path / "predictions.json"
    assert _predict("qa", presets["question_answerer"], questions, output) == 0
    assert "exact_match" not in capsys.readouterr().out  # no metrics without answers
    answers = json.loads(output.read_text())
    examples = kbz.data.read_squad(questions, answers_optional=True)
    assert set(answers) == {e.qas_id for e in examples}
    contexts = {e.qas_id: e.context for e in examples}
    assert all(text in contexts[qas_id] for qas_id, text in answers.items())
    assert (tmp_path / "nbest_predictions.json").is_file()


def test_predict_classifies_a_tsv_without_labels(presets, tmp_path, capsys):
    text = tmp_path / "text.tsv"
    text.write_text("sentence\na gripping film\ndull\n")
    assert _predict("classify", presets["classifier"], text, tmp_path / "p.tsv") == 0
    assert capsys.readouterr().out.strip() == f"Wrote {tmp_path / 'p.tsv'}"
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()]
    assert rows[0] == ["index", "prediction", "probability_negative", "probability_positive"]
    assert [r[0] for r in rows[1:]] == ["0", "1"]


@pytest.mark.parametrize(
    "task, train, message",
    [
        ("tag", "Ada\nLovelace\n", "line 1: has 1 columns, expected 2"),
        ("qa", None, "question has no answers"),
        ("classify", "sentence\ngood film\n", "'label'"),
    ],
)
def test_finetune_still_needs_labels(presets, tmp_path, capsys, task, train, message):
    path = tmp_path / "train.data"
    if train is None:
        document = json.loads((DATA / "squad_v1.1_sample.json").read_text())
        del document["data"][0]["paragraphs"][0]["qas"][0]["answers"]
        train = json.dumps(document)
    path.write_text(train)
    command = ["finetune", task, "--preset", str(presets["classifier"]), "--train", str(path)]
    command += ["--validation", str(path), "--output", str(tmp_path / "run")]
    command += ["--sequence-length", "64"]
    assert main(command) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_collapsed_predictions_warn_without_labels_too(caplog):
    names = ["negative", "positive"]
    predicted = np.array([0] * 198 + [1] * 2)
    with caplog.at_level(logging.WARNING):
        warn_if_collapsed(predicted, None, names, "new.tsv")
    assert "new.tsv: 198 of 200 predictions are class 'negative'" in caplog.text
    assert "no labels" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        warn_if_collapsed(predicted[:10], None, names, "few.tsv")  # ten texts: may be one class
        warn_if_collapsed(np.array([0] * 150 + [1] * 50), None, names, "mixed.tsv")
        warn_if_collapsed(predicted, np.array([0] * 199 + [1]), names, "agrees.tsv")
    assert caplog.text == ""
    with caplog.at_level(logging.WARNING):
        warn_if_collapsed(predicted, np.array([0, 1] * 100), names, "dev.tsv")
    assert "198 of 200 predictions are class 'negative' although 50% of the labels" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        warn_if_all_outside([["O", "O"]] * 25, [[]] * 25, "new.conll")
    assert "every word of 25 sentences was tagged O" in caplog.text


def test_kbz_predict_warns_when_unlabelled_predictions_collapse(presets, tmp_path, caplog):
    """A classifier whose head always says 'negative': 200 new texts, one warning."""
    model = kbz.from_preset(str(presets["classifier"]))
    head = model.get_layer("classifier_head")
    kernel, bias = head.get_weights()
    head.set_weights([np.zeros_like(kernel), np.array([5.0, -5.0], np.float32)])
    collapsed = kbz.save_preset(model, tmp_path / "collapsed")
    text = tmp_path / "text.tsv"
    text.write_text("sentence\n" + "".join(f"review number {i}\n" for i in range(200)))
    with caplog.at_level(logging.WARNING):
        assert _predict("classify", collapsed, text, tmp_path / "p.tsv") == 0
    assert "200 of 200 predictions are class 'negative'" in caplog.text


def test_truncated_examples_are_counted_once_per_file(presets, tmp_path, caplog):
    """A 100,000-character line and a long sentence are cut at --sequence-length: one warning
    per file with the count, the length, the longest example's line and the flag."""
    text = tmp_path / "text.tsv"
    text.write_text("sentence\nshort one\n" + "word " * 20_000 + "\nanother short one\n")
    with caplog.at_level(logging.WARNING):
        args = ("--sequence-length", "32")
        assert _predict("classify", presets["classifier"], text, tmp_path / "p.tsv", *args) == 0
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert warnings == [
        f"{text}: 1 of 3 examples are longer than --sequence-length 32 tokens and were "
        "truncated to it (the longest, line 3, has 20002 tokens: 100% of it dropped). Pass a "
        "larger --sequence-length (at most the preset's max_sequence_length) to keep more."
    ]
    caplog.clear()
    words = tmp_path / "words.conll"
    words.write_text("Ada\n\n" + "word\n" * 40 + "\nParis\n")
    with caplog.at_level(logging.WARNING):
        args = ("--sequence-length", "16")
        assert _predict("tag", presets["tagger"], words, tmp_path / "p.conll", *args) == 0
    assert "1 of 3 sentences are longer than --sequence-length 16 tokens" in caplog.text
    assert "line 3, has 42 tokens" in caplog.text
    predicted = (tmp_path / "p.conll").read_text().strip().split("\n\n")
    assert len(predicted[1].split("\n")) == 40  # every word still gets a tag (O past the cut)


def _probabilities(path) -> np.ndarray:
    rows = [line.split("\t") for line in Path(path).read_text().splitlines()[1:]]
    return np.array([[float(v) for v in row[2:]] for row in rows])


def test_predict_classify_packs_by_default_with_the_same_probabilities(
    presets, tmp_path, monkeypatch
):
    """`kbz predict classify` packs several sentences a row (auto), streamed or read whole
    (--no-bucketing --packing), and writes the probabilities of length buckets."""
    from keras_bert_zoo.training import packed_prediction

    packed_calls = []
    original = packed_prediction.predict
    monkeypatch.setattr(
        packed_prediction, "predict", lambda *a, **k: packed_calls.append(1) or original(*a, **k)
    )
    texts = [
        line.split("\t")[0] for line in (DATA / "sst2_train_head.tsv").read_text().splitlines()
    ]
    source = tmp_path / "sentences.tsv"
    source.write_text("\n".join(texts) + "\n")
    model = presets["classifier"]
    assert _predict("classify", model, source, tmp_path / "buckets.tsv", "--no-packing") == 0
    assert not packed_calls
    assert _predict("classify", model, source, tmp_path / "auto.tsv", "--batch-size", "8") == 0
    assert packed_calls
    whole = ("--no-bucketing", "--packing")
    assert _predict("classify", model, source, tmp_path / "whole.tsv", *whole) == 0
    assert len(packed_calls) == 2
    expected = _probabilities(tmp_path / "buckets.tsv")
    assert len(expected) == len(texts) - 1
    np.testing.assert_allclose(_probabilities(tmp_path / "auto.tsv"), expected, atol=1e-5)
    np.testing.assert_allclose(_probabilities(tmp_path / "whole.tsv"), expected, atol=1e-5)
    # the task model's `predict` on raw texts packs too, and gives the same logits
    classifier = kbz.BertClassifier.from_preset(str(model))
    logits = classifier.predict(texts[1:])
    np.testing.assert_allclose(logits, classifier.predict(texts[1:], packing=False), atol=2e-5)
    assert len(packed_calls) == 3


def test_packing_where_prediction_cannot_pack_exits_2_naming_the_flag(presets, tmp_path, capsys):
    source = DATA / "sst2_train_head.tsv"
    output = tmp_path / "p.tsv"
    onnx = ("--packing", "--runtime", "onnx")
    assert _predict("classify", presets["classifier"], source, output, *onnx) == 2
    assert "--packing" in capsys.readouterr().err and not output.exists()
    embed = ["embed", "--model", str(presets["classifier"]), "--input", str(source)]
    assert main([*embed, "--output", str(tmp_path / "v.npy"), *onnx]) == 2
    assert "--packing" in capsys.readouterr().err and not (tmp_path / "v.npy").exists()
    tagger = kbz.BertTagger.from_preset(str(presets["tagger"]))
    with pytest.raises(ValueError, match="packing=False"):
        tagger.predict([["Ada", "Lovelace"]], packing=True)
