"""Readers: real SST-2 / WNUT-17 / SQuAD subsets and hand-made bad files."""

import json
from pathlib import Path

import numpy as np
import pytest

from keras_bert_zoo import data

DATA = Path(__file__).parent / "data" / "finetune"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sst2_subset():
    result = data.read_glue_tsv(DATA / "sst2_train_head.tsv")
    assert len(result.examples) == 300 and result.label_names == ["0", "1"]
    first = result.examples[0]
    assert first.text_a.startswith("hide new secretions") and first.text_b is None
    assert (first.label, first.line) == ("0", 2)
    lines = (DATA / "sst2_train_head.tsv").read_text().split("\n")[1:]
    raw = [line.split("\t")[1] for line in lines if line]
    np.testing.assert_array_equal(result.labels, np.array(raw, dtype=np.int32))
    assert result.labels.dtype == np.int32


def test_sentence_pairs_by_name_and_index_and_regression(tmp_path):
    path = write(tmp_path, "stsb.tsv", "id\ts1\ts2\tscore\n1\tA man.\tA guy.\t4.5\n2\tx\ty\t0\n")
    pairs = data.read_glue_tsv(path, ("s1", "s2"), "score", regression=True)
    assert [(e.text_a, e.text_b) for e in pairs.examples] == [("A man.", "A guy."), ("x", "y")]
    np.testing.assert_allclose(pairs.labels, [4.5, 0.0])
    assert pairs.label_names == [] and pairs.labels.dtype == np.float32
    by_index = data.read_glue_tsv(path, (1, 2), None, has_header=False)
    assert by_index.examples[0].text_a == "s1" and by_index.examples[0].label is None
    assert len(by_index.labels) == 0


def test_label_vocabulary_sorted_numerically_and_from_train(tmp_path):
    train = data.read_glue_tsv(write(tmp_path, "t.tsv", "sentence\tlabel\na\t10\nb\t2\nc\t2\n"))
    assert train.label_names == ["2", "10"] and train.labels.tolist() == [1, 0, 0]
    names = data.read_glue_tsv(write(tmp_path, "n.tsv", "sentence\tlabel\na\tpos\nb\tneg\n"))
    assert names.label_names == ["neg", "pos"]
    dev = data.read_glue_tsv(
        write(tmp_path, "d.tsv", "sentence\tlabel\nx\tneg\n"), label_names=names.label_names
    )
    assert dev.labels.tolist() == [0] and dev.label_names == ["neg", "pos"]


def test_unseen_label_at_validation(tmp_path):
    path = write(tmp_path, "dev.tsv", "sentence\tlabel\ngood\t1\nodd\t3\n")
    with pytest.raises(ValueError) as error:
        data.read_glue_tsv(path, label_names=["0", "1"])
    message = str(error.value)
    assert str(path) in message and "line 3" in message and "'3'" in message
    assert "['0', '1']" in message


def _assert_names_file_and_line(reader, path, line, expected):
    """The reader fails with `expected`, naming the file and (when given) the line."""
    with pytest.raises(ValueError, match=expected) as error:
        reader(path)
    assert str(path) in str(error.value)
    if line:
        assert f"line {line}:" in str(error.value)


@pytest.mark.parametrize(
    "text, line, expected",
    [
        ("sentence\tlabel\nok\t1\nbad row\n", 3, "has 1 TAB-separated columns, expected 2"),
        ("sentence\tlabel\nok\t1\nx\t\n", 3, "empty label"),
        ("sentence\tlabel\n", None, "no examples"),
        ("", None, "is empty"),
        ("\n \n", None, "is empty"),
    ],
)
def test_bad_tsv(tmp_path, text, line, expected):
    path = write(tmp_path, "bad.tsv", text)
    _assert_names_file_and_line(data.read_glue_tsv, path, line, expected)


def test_unknown_column_name(tmp_path):
    path = write(tmp_path, "t.tsv", "sentence\tlabel\na\t1\n")
    with pytest.raises(ValueError, match="no column named 'text'"):
        data.read_glue_tsv(path, ("text",))


def test_wnut17_subset_lone_tab_separators():
    train = data.read_conll(DATA / "wnut17_train_head.conll")
    assert len(train.sentences) == 120
    first = train.sentences[0]
    assert first.words[:3] == ["@paulwalk", "It", "'s"] and first.line == 1
    assert first.words[14:17] == ["Empire", "State", "Building"]
    assert first.tags[14:17] == ["B-location", "I-location", "I-location"]
    assert train.sentences[1].line == len(first.words) + 2
    assert train.tag_names[0] == "O" and train.tag_names[1:3] == ["B-corporation", "I-corporation"]
    names = train.tag_names
    assert [names[i] for i in train.tag_ids[0]] == first.tags
    assert sum(len(s.words) for s in train.sentences) == sum(len(i) for i in train.tag_ids)


def test_wnut17_dev_with_training_tags():
    all_tags = ["O"] + [
        f"{p}-{t}"
        for t in ("corporation", "creative-work", "group", "location", "person", "product")
        for p in "BI"
    ]
    dev = data.read_conll(DATA / "wnut17_dev_head.conll", tag_names=all_tags)
    assert len(dev.sentences) == 60 and dev.tag_names == all_tags


def test_conll_four_columns_docstart_and_no_final_blank(tmp_path):
    path = write(
        tmp_path,
        "c.conll",
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER",
    )
    result = data.read_conll(path)
    assert [s.words for s in result.sentences] == [["EU", "rejects"], ["Peter"]]
    assert [s.line for s in result.sentences] == [3, 6]
    assert result.tag_names == ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]  # BIO completed


@pytest.mark.parametrize(
    "text, line, expected",
    [
        ("a\tO\nb\tO\tX\n", 2, "has 3 columns, expected 2"),
        ("a\tO\n\nlonely\n", 3, "has 1 columns, expected 2"),
        ("a\tO\nb\t \n", 2, "empty word or tag"),
        ("", None, "is empty"),
    ],
)
def test_bad_conll(tmp_path, text, line, expected):
    path = write(tmp_path, "bad.conll", text)
    _assert_names_file_and_line(data.read_conll, path, line, expected)


def test_words_only_conll_reads_as_text_to_tag_but_not_for_training(tmp_path):
    """`kbz predict tag` labels new text: one word per line, no tag column (issue 30, 1)."""
    path = write(tmp_path, "words.conll", "Ada\nLovelace\nwrote\n\nParis\n")
    text = data.read_conll(path, tag_names=["O", "B-person"], labels_optional=True)
    assert [s.words for s in text.sentences] == [["Ada", "Lovelace", "wrote"], ["Paris"]]
    assert [s.line for s in text.sentences] == [1, 5] and not text.labelled
    assert text.tag_ids == [] and text.tag_names == ["O", "B-person"]
    tagged = data.read_conll(write(tmp_path, "t.conll", "Ada\tB-person\n"), labels_optional=True)
    assert tagged.labelled and tagged.sentences[0].tags == ["B-person"]
    with pytest.raises(ValueError, match="line 1: has 1 columns, expected 2"):
        data.read_conll(path)  # training still needs its tags
    mixed = write(tmp_path, "mixed.conll", "Ada\nLovelace\tB-person\n")
    _assert_names_file_and_line(
        lambda p: data.read_conll(p, labels_optional=True), mixed, 2, r"expected 1 \(a word"
    )


def test_conll_unseen_tag(tmp_path):
    path = write(tmp_path, "dev.conll", "a\tO\nb\tB-person\n\nc\tB-planet\n")
    with pytest.raises(ValueError) as error:
        data.read_conll(path, tag_names=["O", "B-person", "I-person"])
    assert "line 4:" in str(error.value) and "'B-planet'" in str(error.value)
    assert "['O', 'B-person', 'I-person']" in str(error.value)


def test_squad_subset():
    examples = data.read_squad(DATA / "squad_v1.1_sample.json")
    assert len(examples) > 20 and all(e.title == "Super_Bowl_50" for e in examples)
    for e in examples:
        assert e.answers and not e.is_impossible
        for a in e.answers:
            assert e.context[a.start : a.start + len(a.text)] == a.text
    assert examples[0].answers[0].text == "Denver Broncos"


def squad_json(answer, impossible=None, indent=2):
    qa = {"id": "q-1", "question": "Who?", "answers": [answer] if answer else []}
    if impossible is not None:
        qa["is_impossible"] = impossible
    paragraph = {"context": "Ada Lovelace wrote notes.", "qas": [qa]}
    return json.dumps(
        {"version": "2.0", "data": [{"title": "T", "paragraphs": [paragraph]}]}, indent=indent
    )


def test_squad_v2_unanswerable(tmp_path):
    (example,) = data.read_squad(write(tmp_path, "v2.json", squad_json(None, True)))
    assert example.is_impossible and example.answers == ()
    (example,) = data.read_squad(
        write(tmp_path, "a.json", squad_json({"text": "Ada Lovelace", "answer_start": 0}, False))
    )
    assert example.answers == (data.SquadAnswer("Ada Lovelace", 0),)


def test_squad_answer_text_mismatch_names_file_line_and_question(tmp_path):
    path = write(tmp_path, "bad.json", squad_json({"text": "Lovelace", "answer_start": 0}))
    with pytest.raises(ValueError) as error:
        data.read_squad(path)
    message = str(error.value)
    lines = path.read_text().split("\n")
    qid_line = 1 + next(i for i, line in enumerate(lines) if '"id": "q-1"' in line)
    assert str(path) in message and f"line {qid_line}, column" in message
    assert "'q-1'" in message and "'Lovelace'" in message and "'Ada Love'" in message
    one_line = write(
        tmp_path, "one.json", squad_json({"text": "x", "answer_start": 3}, indent=None)
    )
    with pytest.raises(ValueError, match=r"line 1, column \d+ \(question id 'q-1'\)"):
        data.read_squad(one_line)


def test_squad_questions_without_answers_read_for_prediction_only(tmp_path):
    """`kbz predict qa` answers new questions: no `answers` at all (issue 30, 1)."""
    document = json.loads(squad_json(None))
    del document["data"][0]["paragraphs"][0]["qas"][0]["answers"]
    path = write(tmp_path, "questions.json", json.dumps(document))
    (example,) = data.read_squad(path, answers_optional=True)
    assert (example.question, example.answers, example.labelled) == ("Who?", (), False)
    assert not example.is_impossible
    (impossible,) = data.read_squad(
        write(tmp_path, "v2.json", squad_json(None, True)), answers_optional=True
    )
    assert impossible.labelled  # "no answer" is a label
    with pytest.raises(ValueError, match="question has no answers"):
        data.read_squad(path)  # training and evaluation still need them


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"data": [\n  {"title": "T",,}\n]}', r"line 2: is not valid JSON"),
        ('{"version": "1.1"}', "no top-level `data` list"),
        ("", "is empty"),
        (squad_json(None), "question has no answers"),
    ],
)
def test_bad_squad(tmp_path, text, expected):
    path = write(tmp_path, "bad.json", text)
    with pytest.raises(ValueError, match=expected) as error:
        data.read_squad(path)
    assert str(path) in str(error.value)


def test_sorted_labels_and_tag_vocabulary():
    assert data.sorted_labels(["b", "a", "b"]) == ["a", "b"]
    assert data.sorted_labels(["-1", "1", "0"]) == ["-1", "0", "1"]
    assert data.tag_vocabulary(["I-x", "B-y", "B-x"]) == ["O", "B-x", "I-x", "B-y", "I-y"]
    assert data.tag_vocabulary(["S-x", "B-y"]) == [
        "O",
        "B-x",
        "I-x",
        "E-x",
        "S-x",
        "B-y",
        "I-y",
        "E-y",
        "S-y",
    ]


def test_a_stray_text_label_among_numeric_ones_is_an_error_not_a_class(tmp_path):
    rows = "".join(f"a sentence {i}\t{i % 2}\n" for i in range(40))
    path = write(tmp_path, "train.tsv", "sentence\tlabel\n" + rows + "oops\tpositive\n")
    with pytest.raises(
        ValueError,
        match=r"train.tsv, line 42: label 'positive' differs in kind "
        r"from the others \(1 such label\(s\) among 41",
    ):
        data.read_glue_tsv(path)
    validation = data.read_glue_tsv(path, label_names=["0", "1", "positive"])  # explicit: fine
    assert validation.labels[-1] == 2


def test_a_class_with_very_few_examples_is_warned_about(tmp_path, caplog):
    rows = "".join(f"a sentence {i}\t{'rare' if i < 2 else 'common'}\n" for i in range(60))
    result = data.read_glue_tsv(write(tmp_path, "train.tsv", "sentence\tlabel\n" + rows))
    assert result.label_names == ["common", "rare"]
    assert "class(es) 'rare' (2) have fewer than 5 examples" in caplog.text
