"""SavedModel export for TF Serving: raw strings in, named task outputs out.

`export_saved_model(model, "exports/name/1", preprocessor=pre)` writes a version directory
with two signatures:
- `serving_default`: `text` (and `text_pair` for pair tasks) string [batch] -> classifier
  `probabilities`, `label` (+ `label_name`); tagger `tags` per token, `words` and `word_tags`
  (the tag of each whitespace-separated word's first sub-word); question answerer
  `start_logits`, `end_logits`, `answer_start`, `answer_end` (character offsets into the
  context, end exclusive, as SQuAD's `answer_start`) and
  `answer_text`; encoder `sequence_output`, `pooled_output`; embedder `embeddings`; reranker
  `score` (each pair's relevance logit), its inputs named `query` and `passage` (the spec's
  `pair_names`).
- `serve_token_ids`: int32 `token_ids`, `segment_ids`, `padding_mask` [batch, L] -> the model's
  raw outputs.
The sequence length L is fixed (TF Serving's batcher pads variable-length inputs with the
first element, which would corrupt masks). `assets.extra/tf_serving_warmup_requests` holds
warm-up requests. The export is written to a temporary directory and renamed into place, so
a failed export never leaves a half-written version behind. The graph holds no Python-only
ops (no py_function, no Lambda layers); it needs tensorflow-text's ops (see
`keras_bert_zoo.tokenization`), which TF Serving loads with its tensorflow-text build.
"""

import logging
from pathlib import Path

import keras

from keras_bert_zoo.extras import require_tensorflow

tf = require_tensorflow("SavedModel export")
model_pb2 = require_tensorflow("SavedModel export", "tensorflow_serving.apis.model_pb2")
predict_pb2 = require_tensorflow("SavedModel export", "tensorflow_serving.apis.predict_pb2")
prediction_log_pb2 = require_tensorflow(
    "SavedModel export", "tensorflow_serving.apis.prediction_log_pb2"
)
save_context = require_tensorflow("SavedModel export", "tensorflow.python.saved_model.save_context")

from keras_bert_zoo.export.serving import serving_outputs, task_of  # noqa: E402
from keras_bert_zoo.saving import ownership  # noqa: E402
from keras_bert_zoo.saving.atomic import check_replaceable, staged_directory  # noqa: E402
from keras_bert_zoo.tasks import registry  # noqa: E402

logger = logging.getLogger(__name__)
WARMUP_TEXTS = ("This is a warm-up request.", "Another short example sentence.")


def _version_directory(path, overwrite: bool) -> Path:
    path = Path(path)
    if not path.name.isdigit():
        raise ValueError(
            f"Export path must end in a numeric version directory, as TF Serving expects "
            f"(e.g. exports/my_model/1). Received: {path}"
        )
    fix = "Export to a new version number (TF Serving serves the highest) or pass overwrite=True."
    return check_replaceable(path, ownership.SAVED_MODEL, overwrite, "a version", fix)


def _warmup_requests(directory: Path, names: tuple, model_name: str) -> None:
    extra = directory / "assets.extra"
    extra.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(extra / "tf_serving_warmup_requests")) as writer:
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serving_default")
        )
        for name in names:
            request.inputs[name].CopyFrom(tf.make_tensor_proto(list(WARMUP_TEXTS)))
        log = prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)
        )
        writer.write(log.SerializeToString())


def _write_out(archive, directory: Path) -> None:
    """`archive.write_out`, tracing each endpoint once where Keras' archive traces it twice.

    The archive traces every endpoint to list its variables, then `tf.saved_model.save` traces
    it again: TensorFlow keys a function's traces by the save context's variable policy, and
    the first trace ran outside any save context. Listing the variables inside a save context
    with `write_out`'s own options (the defaults) lets the save reuse that trace, which halves
    the tracing of the tokenizer's graph and the model (benchmarks/RESULTS.md, "Test tiers").
    If a Keras release renames the step, the
    export stays correct and traces twice (tests/test_export.py counts the traces).
    """
    list_variables = getattr(archive, "_filter_and_track_resources", None)
    if list_variables is not None:

        def in_save_context():
            with save_context.save_context(tf.saved_model.SaveOptions()):
                list_variables()

        archive._filter_and_track_resources = in_save_context
    archive.write_out(str(directory), verbose=False)


def export_saved_model(
    model: keras.Model,
    path,
    preprocessor=None,
    pairs: bool | None = None,
    label_names=None,
    multi_label: bool | None = None,
    max_answer_length: int = 30,
    strings: bool = True,
    overwrite: bool = False,
) -> Path:
    """Exports `model` (encoder or task model) as a TF Serving SavedModel version directory.

    Args:
        model: encoder, classifier, tagger, question answerer or embedder
            (`kbz.from_preset(...)`).
        path: the version directory, e.g. "exports/my_model/1"; must not exist.
        preprocessor: a `kbz.BertPreprocessor`; default: the model's own (a task model's,
            e.g. `kbz.BertClassifier`); required unless `strings=False`.
        pairs: take a second string too (default: the tasks whose spec says `pair_input`,
            question answering and reranking).
        label_names: class or tag names, to also output them as strings (default: the
            model's own `task_config["label_names"]`).
        multi_label: classifier with independent sigmoid labels (default: as the model was
            built, from its `task_config`).
        max_answer_length: longest answer span in tokens (question answering).
        strings: False exports only `serve_token_ids`.
        overwrite: replace an existing version directory.

    >>> pre = kbz.BertPreprocessor.from_preset("my_preset", sequence_length=128)
    >>> kbz.export_saved_model(model, "exports/sentiment/1", preprocessor=pre)
    """
    path = _version_directory(path, overwrite)
    task = task_of(model)
    if preprocessor is None:
        preprocessor = getattr(model, "preprocessor", None)  # a task model's own
    if strings and preprocessor is None:
        raise ValueError(
            "Exporting `serving_default` (raw strings in) needs a preprocessor: "
            "pass preprocessor=kbz.BertPreprocessor.from_preset(...), or "
            "strings=False to export only `serve_token_ids`."
        )
    task_config = dict(getattr(model, "task_config", {}))
    if multi_label is None:
        multi_label = bool(task_config.get("multi_label", False))
    if label_names is None:
        label_names = task_config.get("label_names")
    spec = registry.find(task)  # None: an encoder
    pairs = bool(spec and spec.pair_input) if pairs is None else bool(pairs)
    names = spec.pair_names if spec else ("text", "text_pair")
    names = names if pairs else names[:1]
    length = preprocessor.sequence_length if preprocessor is not None else None
    # The model is not `track`ed: on TensorFlow, Keras' archive then saves every weight twice
    # (its Keras variables under `variables/` and the same values captured by the endpoints
    # under `_all_variables/`). The endpoints' captures alone are what serving restores.
    archive = keras.export.ExportArchive()
    id_spec = tf.TensorSpec([None, length], tf.int32)

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        return model(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            training=False,
        )

    archive.add_endpoint(
        "serve_token_ids", serve_token_ids, input_signature=[id_spec, id_spec, id_spec]
    )
    if strings:
        archive.track(preprocessor)
        options = dict(
            label_names=label_names, multi_label=multi_label, max_answer_length=max_answer_length
        )
        outputs = serving_outputs(task)
        text_spec = tf.TensorSpec([None], tf.string)

        def serve_text(text):
            return outputs(model, preprocessor, text, None, **options)

        def serve_text_pair(text, text_pair):
            return outputs(model, preprocessor, text, text_pair, **options)

        def serve_query_passage(query, passage):  # the input names are the argument names
            return outputs(model, preprocessor, query, passage, **options)

        serve = serve_query_passage if names == ("query", "passage") else serve_text_pair
        signature = [text_spec] * len(names)
        archive.add_endpoint("serving_default", serve if pairs else serve_text, signature)
    with staged_directory(path) as staging:
        _write_out(archive, staging)
        if strings:
            _warmup_requests(staging, names, path.parent.name)
    logger.info("Exported %s (%s) to %s", model.name, task, path)
    return path
