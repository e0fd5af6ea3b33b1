"""Serving outputs by kind, as TensorFlow graph functions over raw strings.

Each function takes the model, the preprocessor and string tensors and returns the named
outputs of `serving_default` (see `keras_bert_zoo.export`), among those its task's spec
names (`keras_bert_zoo.tasks.spec.TaskSpec.serving_outputs`). A task's spec says which kind
serves it (`TaskSpec.serving`: classes, tags, spans, vectors), so a task whose outputs are
another's (a one-logit scorer is a regression classifier) names that kind and adds nothing
here. The functions are TensorFlow graph code, so they live here rather than in the spec.
"""

import keras

from keras_bert_zoo.extras import require_tensorflow
from keras_bert_zoo.tasks import registry

tf = require_tensorflow("Export for serving (SavedModel, ONNX)")


def task_of(model: keras.Model) -> str:
    """The servable task `model` was built for, from its config (kept by `.keras` files)."""
    task = getattr(model, "task", None)
    if task == "pretrainer":
        raise ValueError(
            "Pretraining models are not served; export the encoder "
            "(kbz.from_preset(dir)) or a fine-tuned task model."
        )
    if task != ENCODER and registry.find(task) is None:
        raise ValueError(
            f"Model '{model.name}' records no servable task (task={task!r}); export a model "
            "built by kbz.from_preset / kbz.build_* (a BertModel, which keeps its task), or "
            "load the .keras file with this package installed."
        )
    return task


def _names(label_names, ids):
    table = tf.constant([str(n) for n in label_names])
    return tf.where(ids >= 0, tf.gather(table, tf.maximum(ids, 0)), "")


def _inputs(preprocessor, text, text_pair):
    return preprocessor(text) if text_pair is None else preprocessor((text, text_pair))


def classifier_outputs(
    model, preprocessor, text, text_pair, label_names=None, multi_label=False, **_
):
    logits = tf.cast(model(_inputs(preprocessor, text, text_pair), training=False), tf.float32)
    if logits.shape[-1] == 1:
        return {"score": logits[:, 0]}
    probabilities = tf.sigmoid(logits) if multi_label else tf.nn.softmax(logits, axis=-1)
    label = tf.argmax(logits, axis=-1, output_type=tf.int32)
    out = {"probabilities": probabilities, "label": label}
    if label_names is not None:
        out["label_name"] = _names(label_names, label)
    return out


def tagger_outputs(model, preprocessor, text, text_pair, label_names=None, **_):
    """Per-token tags, and per whitespace word the tag of its first sub-word (-1: truncated)."""
    inputs = _inputs(preprocessor, text, text_pair)
    logits = model(inputs, training=False)
    tags = tf.where(
        inputs["padding_mask"] > 0, tf.argmax(logits, axis=-1, output_type=tf.int32), -1
    )
    words = tf.strings.split(text)
    pieces = preprocessor.tokenizer(words)  # [batch, (words), (pieces)]
    counts = tf.cast(pieces.row_lengths(axis=2), tf.int32)
    first = 1 + tf.cumsum(counts, axis=1, exclusive=True)  # after [CLS]
    valid = (counts > 0) & (first < tf.reduce_sum(inputs["padding_mask"], 1)[:, None] - 1)
    positions = tf.where(valid, first, 0)
    word_tags = tf.where(valid, tf.gather(tags, positions, batch_dims=1), -1)
    out = {"tags": tags, "words": words.to_tensor(""), "word_tags": word_tags.to_tensor(-1)}
    if label_names is not None:
        out["tag_names"] = _names(label_names, tags)
        out["word_tag_names"] = _names(label_names, out["word_tags"])
    return out


def question_answerer_outputs(model, preprocessor, text, text_pair, max_answer_length=30, **_):
    """Best span inside the context (start <= end < start + max_answer_length) and its text.

    `answer_start` / `answer_end` are character offsets into the context (`text_pair`), end
    exclusive, as SQuAD's `answer_start`: `text_pair[answer_start:answer_end]` in Python is
    `answer_text`. -1 when the window holds no context.
    """
    inputs = preprocessor((text, text_pair))
    out = model(inputs, training=False)
    start, end = out["start_logits"], out["end_logits"]
    length = tf.shape(start)[1]
    real = tf.reduce_sum(inputs["padding_mask"], axis=1)
    in_context = (inputs["segment_ids"] > 0) & (tf.range(length)[None, :] < real[:, None] - 1)
    scores = start[:, :, None] + end[:, None, :]
    offset = tf.range(length)[None, :] - tf.range(length)[:, None]  # end - start
    allowed = (offset >= 0) & (offset < max_answer_length)
    allowed = allowed[None] & in_context[:, :, None] & in_context[:, None, :]
    best = tf.argmax(
        tf.reshape(tf.where(allowed, scores, -1e30), [tf.shape(start)[0], -1]),
        axis=-1,
        output_type=tf.int32,
    )
    answer_start, answer_end = best // length, best % length
    # Token index in the packed sequence -> token of the context -> its character span.
    context_first = tf.argmax(
        tf.cast(inputs["segment_ids"] > 0, tf.int32), axis=1, output_type=tf.int32
    )
    _, starts, ends = preprocessor.tokenizer.tokenize_with_offsets(text_pair, unit="char")
    width = preprocessor.sequence_length  # a context never has more tokens in the window
    found = tf.reduce_any(allowed, axis=[1, 2])

    def offset(values, token):  # rows without an answer read index 0, then are masked
        index = tf.where(found, token - context_first, 0)
        return tf.gather(values.to_tensor(0, shape=[None, width]), index, batch_dims=1)

    begin, stop = offset(starts, answer_start), offset(ends, answer_end)
    answer = tf.strings.substr(text_pair, begin, stop - begin, unit="UTF8_CHAR")
    return {
        "start_logits": start,
        "end_logits": end,
        "answer_start": tf.where(found, begin, -1),
        "answer_end": tf.where(found, stop, -1),
        "answer_text": tf.where(found, answer, ""),
    }


def embedder_outputs(model, preprocessor, text, text_pair, **_):
    """`embeddings` `[batch, hidden]` float32 (L2-normalised if the model normalises)."""
    return {"embeddings": model(_inputs(preprocessor, text, text_pair), training=False)}


def encoder_outputs(model, preprocessor, text, text_pair, **_):
    return model(_inputs(preprocessor, text, text_pair), training=False)


ENCODER = "encoder"  # a bare encoder's task: its sequence and pooled outputs
# `TaskSpec.serving` -> its function; a one-logit classes model serves `score`.
SERVING = {
    "classes": classifier_outputs,
    "tags": tagger_outputs,
    "spans": question_answerer_outputs,
    "vectors": embedder_outputs,
    ENCODER: encoder_outputs,
}


def serving_outputs(task: str):
    """The serving function of a model of `task` (`task_of`)."""
    return SERVING[ENCODER if task == ENCODER else registry.get(task).serving]
