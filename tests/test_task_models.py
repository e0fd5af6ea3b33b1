# ruff: noqa: F811 (the imported `preset` fixture is a test argument)
"""The task models (`kbz.BertClassifier`, `BertTagger`, `BertQuestionAnswerer`,
`BertEmbedder`, `BertReranker`) on raw data, TensorFlow tier: each task's short script
(`task_model_scripts.py`, also run on JAX and PyTorch), the same weights as `kbz finetune`
for the same seed and data, the same vectors as `kbz embed`, export without a separate
preprocessor, a user's own `compile` winning, and every bad input stopped with its argument
named before any work."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from task_model_scripts import (  # noqa: F401 (the fixture and the shared test)
    DATA,
    preset,
    squad,
    sst2,
    test_task_script_on_raw_data,
    wnut,
)

import keras_bert_zoo as kbz
from keras_bert_zoo.jobs import embed as embed_job
from keras_bert_zoo.jobs import finetune as runs


def test_fit_gives_the_weights_of_kbz_finetune(preset, tmp_path):
    """The same seed and data: `BertClassifier.fit` and `kbz finetune classify` train the same
    weights (the same batches, schedule, optimizer, loss and dropout masks)."""
    train = tmp_path / "train.tsv"
    train.write_text("".join((DATA / "sst2_train_head.tsv").read_text().splitlines(True)[:49]))
    runs.run_finetune(
        "classifier", str(preset), str(train), str(train), str(tmp_path / "run"),
        epochs=2, batch_size=8, sequence_length=32, export=False, verbose=0, seed=3, keep="last",
    )  # fmt: skip
    expected = kbz.load_model(tmp_path / "run" / "model.keras")

    rows = [line.split("\t") for line in train.read_text().splitlines()[1:]]
    keras.utils.set_random_seed(3)
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    classifier.fit([r[0] for r in rows], [int(r[1]) for r in rows], batch_size=8, epochs=2,
                   seed=3, verbose=0)  # fmt: skip
    assert len(classifier.weights) == len(expected.weights)
    moved = 0
    for ours, theirs in zip(classifier.weights, expected.weights, strict=True):
        assert ours.path == theirs.path
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-5, err_msg=ours.path)
        moved += 1
    assert moved > 10


def _same_weights(model, expected, start) -> None:
    """`model`'s weights are `expected`'s, and training moved them from `start`'s."""
    assert len(model.weights) == len(expected.weights) == len(start.weights) > 10
    moved = 0
    for ours, theirs, before in zip(model.weights, expected.weights, start.weights, strict=True):
        assert ours.path == theirs.path == before.path
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-5, err_msg=ours.path)
        moved += not np.allclose(ours.numpy(), before.numpy(), atol=1e-4)
    assert moved > len(start.weights) // 2, moved


def test_tagger_and_question_answerer_fit_give_the_weights_of_kbz_finetune(preset, tmp_path):
    """Word-level tags and SQuAD answers from raw data: `BertTagger.fit` and
    `BertQuestionAnswerer.fit` train the weights `kbz finetune tag` / `qa` train on the same
    file, seed and recipe (label alignment, windows, batches, schedule and loss are one code)."""
    words, tags = wnut(24)
    train = tmp_path / "train.conll"
    train.write_text("".join(
        "".join(f"{w}\t{t}\n" for w, t in zip(ws, ts, strict=True)) + "\n"
        for ws, ts in zip(words, tags, strict=True)
    ))  # fmt: skip
    recipe = dict(epochs=2, batch_size=8, sequence_length=64, seed=3)
    runs.run_finetune("tagger", str(preset), str(train), str(train), str(tmp_path / "tag"),
                      export=False, verbose=0, keep="last", **recipe)  # fmt: skip
    expected = kbz.load_model(tmp_path / "tag" / "model.keras")
    names = kbz.data.tag_vocabulary(t for row in tags for t in row)
    keras.utils.set_random_seed(3)
    tagger = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=64)
    start = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=64)
    tagger.fit(words, tags, batch_size=8, epochs=2, seed=3, verbose=0)
    _same_weights(tagger, expected, start)

    x, y = squad(12)
    paragraphs = [
        {"context": c, "qas": [{"id": str(i), "question": q,
                                "answers": [{"text": t, "answer_start": a}]}]}
        for i, (q, c, t, a) in enumerate(zip(x["question"], x["context"], y["text"],
                                             y["answer_start"], strict=True))
    ]  # fmt: skip
    squad_file = tmp_path / "train.json"
    squad_file.write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}))
    windows = dict(doc_stride=32, max_query_length=24)
    runs.run_finetune("question_answerer", str(preset), str(squad_file), str(squad_file),
                      str(tmp_path / "qa"), export=False, verbose=0, keep="last", **windows,
                      **recipe)  # fmt: skip
    expected = kbz.load_model(tmp_path / "qa" / "model.keras")
    keras.utils.set_random_seed(3)
    answerer = kbz.BertQuestionAnswerer.from_preset(preset, sequence_length=64, **windows)
    start = kbz.BertQuestionAnswerer.from_preset(preset, sequence_length=64, **windows)
    answerer.fit(x, y, batch_size=8, epochs=2, seed=3, verbose=0)
    _same_weights(answerer, expected, start)


def test_a_new_tagger_head_starts_at_the_training_tags_log_frequencies(preset):
    """`head_bias="prior"` (the default): a new head's bias is the add-one smoothed log
    frequency of each tag over the training words (each word's first sub-word, counted from
    the word-level tags here); a trained head (a non-zero bias) is kept, so a second `fit`
    continues; `head_bias="zero"` keeps transformers' zeros."""
    words, tags = wnut(24)
    names = kbz.data.tag_vocabulary(t for row in tags for t in row)
    tagger = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=128)
    job = tagger.job()
    _, y, _ = job.arrays(tagger.raw_data(words, tags))
    job.start_head(tagger, y)
    bias = tagger.get_layer("tagger_head").bias
    counts = np.array([sum(row.count(name) for row in tags) for name in names])
    assert counts.sum() == sum(map(len, words)) and counts.min() == 0  # an unseen tag too
    expected = np.log((counts + 1) / (counts.sum() + len(names)))
    np.testing.assert_allclose(bias.numpy(), expected, rtol=1e-6)
    assert names[int(np.argmax(bias.numpy()))] == "O"

    bias.assign(expected + 0.5)  # trained: kept
    job.start_head(tagger, y)
    np.testing.assert_allclose(bias.numpy(), expected + 0.5, rtol=1e-6)

    zero = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=128, head_bias="zero")
    zero.job().start_head(zero, y)
    assert not np.any(zero.get_layer("tagger_head").bias.numpy())


def test_encode_gives_the_vectors_of_kbz_embed(preset):
    texts = sst2(40)[0]
    embedder = kbz.BertEmbedder.from_preset(preset, sequence_length=32)
    model, preprocessor = embed_job.load_embedder(preset, 32)
    expected = embed_job.embed_texts(model, preprocessor, texts)
    np.testing.assert_allclose(embedder.encode(texts), expected, atol=1e-6)
    # both packed several texts to a row (auto); length buckets give the same vectors
    np.testing.assert_allclose(embedder.encode(texts, packing=False), expected, atol=1e-5)


def test_export_takes_the_models_own_preprocessor(preset, tmp_path):
    texts, labels = sst2(16)
    classifier = kbz.BertClassifier.from_preset(
        preset, label_names=["negative", "positive"], sequence_length=32
    )
    kbz.export_saved_model(classifier, tmp_path / "export" / "1")
    served = tf.saved_model.load(str(tmp_path / "export" / "1")).signatures["serving_default"]
    outputs = served(text=tf.constant(texts[:4]))
    expected = keras.ops.softmax(classifier.predict(texts[:4]))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-5)
    names = [n.decode() for n in outputs["label_name"].numpy()]
    assert names == classifier.classify(texts[:4])


@pytest.mark.parametrize("packing", [False, True])
def test_a_users_own_compile_wins(preset, packing):
    """The user's optimizer runs every step `fit` takes, on padded rows (16 examples in
    batches of 8: 2 steps) and on packed ones (the model trained is the packed classifier)."""
    texts, labels = sst2(16)
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    classifier.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    steps = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: steps.append(1))
    fit = dict(batch_size=8, epochs=1, verbose=0, packing=packing, callbacks=[counter])
    classifier.fit(texts, labels, **fit)
    assert isinstance(classifier.optimizer, keras.optimizers.SGD)
    assert int(classifier.optimizer.iterations.numpy()) == len(steps) > 0
    assert packing or len(steps) == 2


def test_compile_auto_takes_the_tasks_schedule(preset):
    """`compile(learning_rate=...)` leaves the optimizer "auto": AdamW on the task's warmup and
    decay over the steps `fit` runs (2 epochs of 2 batches: 4 steps, the rate back to 0)."""
    texts, labels = sst2(16)
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    classifier.compile(learning_rate=1e-3)
    classifier.fit(texts, labels, batch_size=8, epochs=2, verbose=0)
    optimizer = classifier.optimizer
    assert type(optimizer).__name__ == "AdamW" and optimizer.epsilon == 1e-6
    schedule = optimizer._learning_rate
    assert float(schedule(0)) == 0.0 or float(schedule(1)) <= 1e-3
    assert float(schedule(4)) == pytest.approx(0.0, abs=1e-9)
    classifier.fit(texts, labels, batch_size=8, epochs=1, verbose=0)  # its own schedule again
    assert classifier.optimizer is not optimizer
    assert float(classifier.optimizer._learning_rate(2)) == pytest.approx(0.0, abs=1e-9)


def test_compile_keeps_a_warmup_fraction_of_zero(preset):
    """`warmup_fraction=0.0` (`kbz finetune --warmup-fraction 0`) is a choice: the rate starts
    at its peak, where the task's default would warm up from 0."""
    texts, labels = sst2(16)
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    classifier.compile(learning_rate=1e-3, warmup_fraction=0.0)
    classifier.fit(texts, labels, batch_size=8, epochs=1, verbose=0)
    assert float(classifier.optimizer._learning_rate(0)) == pytest.approx(1e-3)


def test_tf_data_of_raw_strings(preset):
    texts, labels = sst2(16)
    dataset = tf.data.Dataset.from_tensor_slices((texts, [int(v == "positive") for v in labels]))
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    history = classifier.fit(dataset.batch(4), batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    np.testing.assert_allclose(
        classifier.predict(tf.data.Dataset.from_tensor_slices(texts[:3])),
        classifier.predict(texts[:3]),
        atol=1e-6,
    )


def _bad(call, *expected):
    with pytest.raises(ValueError) as error:
        call()
    for text in expected:
        assert text in str(error.value), str(error.value)


def test_bad_inputs_are_named_before_any_work(preset):
    texts, labels = sst2(16)
    classifier = kbz.BertClassifier.from_preset(
        preset, label_names=["negative", "positive"], sequence_length=32
    )
    _bad(lambda: classifier.fit(texts, labels[:-1]), "`x` and `y`", "16 and 15")
    _bad(lambda: classifier.fit(texts, ["negative", "great"] * 8), "does not know", "great")
    _bad(lambda: classifier.evaluate(texts[:2], ["negative", "meh"]), "meh")
    _bad(lambda: classifier.fit([], []), "`x` is empty")
    _bad(lambda: classifier.fit({"text": texts}, labels), "`x` must be a list", "dict")
    _bad(lambda: classifier.predict("one text"), "single string", "Wrap it in a list")
    _bad(lambda: classifier.fit(texts, [0, 1, 2, 1] * 4), "outside 0..1")
    _bad(lambda: classifier.fit(texts, labels, batch_size=64), "fewer than one batch")
    _bad(lambda: classifier.fit(texts), "needs `y`")

    words, tags = wnut(4)
    names = kbz.data.tag_vocabulary(t for row in tags for t in row)
    tagger = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=32)
    _bad(lambda: tagger.fit(words, [tags[0][:-1], *tags[1:]]), "`y[0]` must hold one tag per")
    _bad(lambda: tagger.fit([" ".join(w) for w in words], tags), "`x[0]` must be a list of words")

    x, y = squad(2)
    qa = kbz.BertQuestionAnswerer.from_preset(preset, sequence_length=64, max_query_length=24)
    wrong = {"text": y["text"], "answer_start": [y["answer_start"][0] + 1, y["answer_start"][1]]}
    _bad(lambda: qa.fit(x, wrong), 'y["text"][0]', "is not at")
    _bad(lambda: qa.fit(x["question"], y), "`x` must be a dict with the key 'question'")


def test_predict_file_formats_match_the_readers(preset, tmp_path):
    """Raw data and the file readers give the tagger the same arrays (one engine)."""
    words, tags = wnut(8)
    path = tmp_path / "sample.conll"
    path.write_text(
        "\n\n".join("\n".join(f"{w}\t{t}" for w, t in zip(ws, ts, strict=True))
                    for ws, ts in zip(words, tags, strict=True)) + "\n"
    )  # fmt: skip
    names = kbz.data.tag_vocabulary(t for row in tags for t in row)
    tagger = kbz.BertTagger.from_preset(preset, labels=names, sequence_length=32)
    job = tagger.job()
    from_file = job.arrays(job.read(path, label_names=names))
    from_raw = job.arrays(tagger.raw_data(words, tags))
    for a, b in zip(from_file, from_raw, strict=True):
        keras.tree.map_structure(np.testing.assert_array_equal, a, b)


def test_numpy_generators_and_tokenized_inputs(preset):
    """Numpy columns and generators of raw examples train as lists do; tokenized dicts need
    the user's own compile (the task's schedule is made from raw data)."""
    texts, labels = sst2(16)
    classifier = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    history = classifier.fit(np.array(texts), np.array(labels), batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    stream = ((text, label) for text, label in zip(texts, labels, strict=True))
    assert np.isfinite(classifier.fit(stream, batch_size=8, verbose=0).history["loss"]).all()
    tokens = classifier.preprocessor(texts)
    fresh = kbz.BertClassifier.from_preset(preset, num_classes=2, sequence_length=32)
    _bad(lambda: fresh.fit(tokens, np.zeros(16, "int32")), "needs `compile(optimizer=")
    fresh.compile(optimizer="adam", loss=kbz.tasks.classifier_loss(2))
    fresh.fit(tokens, np.zeros(16, "int32"), batch_size=8, verbose=0)
    np.testing.assert_allclose(fresh.predict(tokens), fresh.predict(texts), atol=1e-5)
