"""SavedModel export: outputs equal the Keras model in a process that imports only TensorFlow
and tensorflow-text; saved_model_cli sees both signatures; bad input; atomic writes."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo as kbz
from keras_bert_zoo.export import export_saved_model
from keras_bert_zoo.export.serving import SERVING
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.tokenization import BertPreprocessor, BertTokenizer

LENGTH = 24
TEXTS = [
    "The film was a delight from start to finish.",
    "naïve café in Zürich",
    "",
    "Steve Jobs founded Apple in California .",
]
PAIRS = ["Where was Apple founded?", "Who wrote it?", "", "When?"]
CONTEXTS = [
    "Apple was founded in Cupertino, Zürich-naïve California, in 1976.",
    "The book was written by Jane Austen.",
    "",
    "Long ago.",
]
TAGS = ["O", "B-person", "I-person", "B-location"]

# Runs in a fresh interpreter: only tensorflow and tensorflow_text are imported; importing
# this package or keras-hub would raise (TensorFlow itself imports keras as tf.keras).
LOADER = r"""
import json, sys
sys.modules["keras_bert_zoo"] = None
sys.modules["keras_hub"] = None
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
requests = json.load(open(sys.argv[1]))
results = {}
for name, request in requests.items():
    loaded = tf.saved_model.load(request["path"])
    text = loaded.signatures["serving_default"](
        **{k: tf.constant(v) for k, v in request["text"].items()})
    ids = loaded.signatures["serve_token_ids"](
        **{k: tf.constant(np.array(v, np.int32)) for k, v in request["ids"].items()})
    results[name] = {
        "text": {k: (np.char.decode(v.numpy().astype(bytes), "utf-8").tolist()
                     if v.dtype == tf.string else v.numpy().tolist())
                 for k, v in text.items()},
        "ids": {k: v.numpy().tolist() for k, v in ids.items()},
        "keras_loaded": sorted(m for m in ("keras_bert_zoo", "keras_hub")
                               if sys.modules.get(m) is not None),
    }
json.dump(results, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor(
        BertTokenizer.from_preset("bert_tiny_en_uncased"), sequence_length=LENGTH
    )


def _encoder():
    keras.utils.set_random_seed(7)
    return kbz.build_encoder(
        vocabulary_size=30522,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=64,
    )


@pytest.fixture(scope="module")
def exported(preprocessor, tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    models = {
        "classifier": (kbz.build_classifier(_encoder(), num_classes=3), {"text": TEXTS}),
        "tagger": (kbz.build_tagger(_encoder(), num_tags=4), {"text": TEXTS}),
        "question_answerer": (
            kbz.build_question_answerer(_encoder()),
            {"text": PAIRS, "text_pair": CONTEXTS},
        ),
    }
    requests, traces = {}, {}
    for name, (model, text) in models.items():
        with pytest.MonkeyPatch.context() as patch:  # counts the traces of `serving_default`
            kind = registry.get(name).serving
            outputs = SERVING[kind]

            def counted(*args, name=name, outputs=outputs, **kwargs):
                traces[name] = traces.get(name, 0) + 1
                return outputs(*args, **kwargs)

            patch.setitem(SERVING, kind, counted)
            path = export_saved_model(
                model,
                root / name / "1",
                preprocessor=preprocessor,
                label_names=TAGS if name == "tagger" else None,
            )
        ids = (
            preprocessor(TEXTS)
            if "text_pair" not in text
            else preprocessor((tf.constant(PAIRS), tf.constant(CONTEXTS)))
        )
        requests[name] = {
            "path": str(path),
            "text": text,
            "ids": {k: v.numpy().tolist() for k, v in ids.items()},
        }
    (root / "requests.json").write_text(json.dumps(requests))
    (root / "loader.py").write_text(LOADER)
    subprocess.run(
        [
            sys.executable,
            str(root / "loader.py"),
            str(root / "requests.json"),
            str(root / "results.json"),
        ],
        check=True,
        capture_output=True,
    )
    results = json.loads((root / "results.json").read_text())
    return models, requests, results, traces


def test_loaded_without_keras(exported):
    _, _, results, _ = exported
    assert not any(r["keras_loaded"] for r in results.values())


def test_each_endpoint_is_traced_once(exported):
    # Keras' archive traces twice unless export_saved_model lists the variables in a save
    # context (`_write_out`): the tokenizer's graph is most of an export's time.
    _, _, _, traces = exported
    assert traces == {"classifier": 1, "tagger": 1, "question_answerer": 1}


def test_each_weight_is_stored_once(exported):
    # Keras' archive of a tracked model holds every weight twice (`variables/` and
    # `_all_variables/`): 2x the disk of the preset. Ours: the weights plus dropout's seeds.
    models, requests, _, _ = exported
    for name, (model, _) in models.items():
        stored = tf.train.list_variables(f"{requests[name]['path']}/variables/variables")
        values = sum(int(np.prod(shape)) for key, shape in stored if "OBJECT_GRAPH" not in key)
        assert model.count_params() <= values <= model.count_params() + 2 * len(model.layers)


def test_token_id_signature_equals_keras(exported):
    models, requests, results, _ = exported
    for name, (model, _) in models.items():
        ids = {k: np.array(v, np.int32) for k, v in requests[name]["ids"].items()}
        expected = tf.nest.map_structure(np.asarray, model(ids))
        got = results[name]["ids"]
        if not isinstance(expected, dict):
            (got,) = got.values()
            np.testing.assert_allclose(got, expected, atol=1e-5)
        else:
            for key in expected:
                np.testing.assert_allclose(got[key], expected[key], atol=1e-5)


def test_string_signature_classifier(exported, preprocessor):
    models, _, results, _ = exported
    model = models["classifier"][0]
    logits = np.asarray(model(preprocessor(TEXTS)))
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    out = results["classifier"]["text"]
    np.testing.assert_allclose(out["probabilities"], probabilities, atol=1e-5)
    assert out["label"] == logits.argmax(-1).tolist()


def test_string_signature_tagger_word_tags(exported, preprocessor):
    models, _, results, _ = exported
    model = models["tagger"][0]
    inputs = preprocessor(TEXTS)
    tags = np.asarray(model(inputs)).argmax(-1)
    out = results["tagger"]["text"]
    row = 3  # "Steve Jobs founded Apple in California ."
    words = TEXTS[row].split()
    assert out["words"][row][: len(words)] == words
    position = 1
    for j, word in enumerate(words):
        assert out["word_tags"][row][j] == tags[row, position]
        assert out["word_tag_names"][row][j] == TAGS[tags[row, position]]
        position += len(preprocessor.tokenizer(word).numpy())
    assert out["word_tags"][2] == [-1] * len(out["word_tags"][2])  # empty text: no words


def _best_span(start_logits, end_logits, segment_ids, padding_mask, max_length=30):
    """The highest-scoring (start, end) inside the context, by brute force."""
    last = int(padding_mask.sum()) - 1  # the final [SEP]
    context = [i for i in range(last) if segment_ids[i] == 1]
    spans = [(s, e) for s in context for e in context if 0 <= e - s < max_length]
    return max(spans, key=lambda span: start_logits[span[0]] + end_logits[span[1]])


def test_string_signature_question_answerer_span(exported, preprocessor):
    models, _, results, _ = exported
    model = models["question_answerer"][0]
    inputs = {
        k: v.numpy() for k, v in preprocessor((tf.constant(PAIRS), tf.constant(CONTEXTS))).items()
    }
    logits = model(inputs)
    out = results["question_answerer"]["text"]
    for row, context in enumerate(CONTEXTS):
        start, end = out["answer_start"][row], out["answer_end"][row]
        if not context:
            assert (start, end, out["answer_text"][row]) == (-1, -1, "")
            continue
        expected = _best_span(
            np.asarray(logits["start_logits"][row]),
            np.asarray(logits["end_logits"][row]),
            inputs["segment_ids"][row],
            inputs["padding_mask"][row],
        )
        first = int(np.argmax(inputs["segment_ids"][row]))  # first context token
        _, begins, ends = preprocessor.tokenizer.tokenize_with_offsets(
            tf.constant([context]), unit="char"
        )
        begin = int(begins[0][expected[0] - first].numpy())
        stop = int(ends[0][expected[1] - first].numpy())
        assert (start, end) == (begin, stop)  # character offsets into the context, as SQuAD
        assert out["answer_text"][row] == context[begin:stop] != ""


@pytest.mark.e2e  # a fresh interpreter
def test_saved_model_cli_lists_signatures(exported):
    _, requests, _, _ = exported
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, tensorflow_text; from tensorflow.python.tools "
            "import saved_model_cli; sys.argv = ['saved_model_cli'] + sys.argv[1:]; "
            "saved_model_cli.main()",
            "show",
            "--all",
            "--dir",
            requests["classifier"]["path"],
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "signature_def['serving_default']" in shown
    assert "signature_def['serve_token_ids']" in shown
    assert "inputs['text'] tensor_info:\n        dtype: DT_STRING" in shown
    assert f"shape: (-1, {LENGTH})" in shown


@pytest.mark.e2e  # a fresh interpreter
def test_saved_model_cli_runs_the_string_signature(exported):
    _, requests, results, _ = exported
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, tensorflow_text; from tensorflow.python.tools "
            "import saved_model_cli; sys.argv = ['saved_model_cli'] + sys.argv[1:]; "
            "saved_model_cli.main()",
            "run",
            "--dir",
            requests["classifier"]["path"],
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--input_exprs",
            f"text={TEXTS[:2]!r}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "Result for output key label:" in ran
    expected = results["classifier"]["text"]["label"][:2]
    assert f"[{expected[0]} {expected[1]}]" in ran


def test_no_python_only_ops(exported):
    _, requests, _, _ = exported
    from tensorflow.core.protobuf import saved_model_pb2

    for request in requests.values():
        proto = saved_model_pb2.SavedModel()
        proto.ParseFromString(open(f"{request['path']}/saved_model.pb", "rb").read())
        graph = proto.meta_graphs[0].graph_def
        ops = {n.op for n in graph.node} | {
            n.op for f in graph.library.function for n in f.node_def
        }
        assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_warmup_requests_present(exported):
    _, requests, _, _ = exported
    from tensorflow_serving.apis import prediction_log_pb2

    path = f"{requests['question_answerer']['path']}/assets.extra/tf_serving_warmup_requests"
    records = list(tf.data.TFRecordDataset(path))
    log = prediction_log_pb2.PredictionLog.FromString(records[0].numpy())
    assert set(log.predict_log.request.inputs) == {"text", "text_pair"}


def test_bad_exports_are_clear_errors_and_leave_nothing(preprocessor, tmp_path, monkeypatch):
    model = kbz.build_classifier(_encoder(), num_classes=2)
    with pytest.raises(ValueError, match="needs a preprocessor"):
        export_saved_model(model, tmp_path / "m" / "1")
    with pytest.raises(ValueError, match="numeric version directory"):
        export_saved_model(model, tmp_path / "m" / "latest", preprocessor=preprocessor)
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "saved_model.pb").write_bytes(b"an earlier version")
    with pytest.raises(ValueError, match="already holds a version"):
        export_saved_model(model, tmp_path / "m" / "1", preprocessor=preprocessor)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("keras_bert_zoo.export.saved_model._warmup_requests", broken)
    with pytest.raises(OSError, match="disk full"):
        export_saved_model(model, tmp_path / "m" / "2", preprocessor=preprocessor)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["1"]


def test_kbz_export_cli_from_preset_and_keras_file(tmp_path, capsys):
    from keras_bert_zoo.cli import main

    model = kbz.build_classifier(_encoder(), num_classes=2, label_names=["negative", "positive"])
    vocabulary = kbz.presets.load_preset_config("bert_tiny_en_uncased").vocabulary_path
    preset = kbz.save_preset(model, tmp_path / "preset", vocabulary=vocabulary, lowercase=True)
    assert main(["export", str(preset), str(tmp_path / "a" / "1"), "--sequence-length", "16"]) == 0
    loaded = tf.saved_model.load(str(tmp_path / "a" / "1"))
    out = loaded.signatures["serving_default"](text=tf.constant(["great", "awful"]))
    assert set(out["label_name"].numpy().astype(str)) <= {"negative", "positive"}
    model.save(tmp_path / "m.keras")
    assert main(["export", str(tmp_path / "m.keras"), str(tmp_path / "b" / "1")]) == 2
    assert "holds no vocabulary: pass --preset" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "m.keras"), str(tmp_path / "b" / "1"), "--ids-only"]) == 0
    loaded = tf.saved_model.load(str(tmp_path / "b" / "1"))
    # Keras makes the only endpoint the default signature too: ids in, logits out
    assert set(loaded.signatures) == {"serve_token_ids", "serving_default"}
    inputs = loaded.signatures["serving_default"].structured_input_signature[1]
    assert set(inputs) == {"token_ids", "segment_ids", "padding_mask"}


def test_kbz_export_defaults_to_the_length_the_preset_records(tmp_path, capsys):
    """A run's preset records its --sequence-length; `kbz export` takes it (issue 30, 9)."""
    from keras_bert_zoo.cli import main
    from keras_bert_zoo.cli.parser import build_parser

    model = kbz.build_classifier(_encoder(), num_classes=2)
    vocabulary = kbz.presets.load_preset_config("bert_tiny_en_uncased").vocabulary_path
    preset = kbz.save_preset(
        model, tmp_path / "preset", vocabulary=vocabulary, lowercase=True, sequence_length=20
    )
    assert json.loads((preset / "preset.json").read_text())["sequence_length"] == 20
    assert kbz.presets.load_preset_config(str(preset)).sequence_length == 20
    assert main(["export", str(preset), str(tmp_path / "a" / "1")]) == 0
    assert "(classifier, 20 tokens)" in capsys.readouterr().out
    loaded = tf.saved_model.load(str(tmp_path / "a" / "1"))
    inputs = loaded.signatures["serve_token_ids"].structured_input_signature[1]
    assert inputs["token_ids"].shape.as_list() == [None, 20]
    # a re-saved model keeps its preset's length unless told another
    again = kbz.save_preset(kbz.from_preset(str(preset)), tmp_path / "again")
    assert kbz.presets.load_preset_config(str(again)).sequence_length == 20
    help_text = build_parser()._subparsers._group_actions[0].choices["export"].format_help()
    assert "default: the length the preset records" in " ".join(help_text.split())
    with pytest.raises(ValueError, match="`sequence_length` must be an integer from 2"):
        kbz.save_preset(model, tmp_path / "bad", vocabulary=vocabulary, lowercase=True,
                        sequence_length=600)  # fmt: skip
