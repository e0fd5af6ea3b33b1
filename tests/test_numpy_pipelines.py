"""The numpy pipelines of JAX and PyTorch (issue 28) against TensorFlow's, on TensorFlow:
`numpy_stream` gives the tf.data stream's batches in the same order (trims included) and
starts at any step as its exact tail; the fine-tuning tasks' `arrays` and `embed_texts` give
the same arrays and vectors through the host tokenizer (`tokenizers` + numpy) as through the
TensorFlow graph, on the bundled real samples (SST-2, WNUT-17, SQuAD v1.1).
tests/test_backend_{jax,torch}_notf.py run the jobs themselves with TensorFlow blocked."""

from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import random_inputs, save_tiny_preset, tokenizer_path

import keras_bert_zoo as kbz
from keras_bert_zoo.jobs import embed
from keras_bert_zoo.tasks.models import FINETUNING_TASKS
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import batching, bucketed_prediction

DATA = Path(__file__).parent / "data" / "finetune"
TRAIN = {
    "classifier": DATA / "sst2_train_head.tsv",
    "tagger": DATA / "wnut17_train_head.conll",
    "question_answerer": DATA / "squad_v1.1_sample.json",
}


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset", dropout=0.0)


def _stream_data(count=50, length=64, seed=0):
    lengths = np.random.default_rng(seed).integers(2, length + 1, count).tolist()
    x = random_inputs(batch=count, length=length, vocabulary_size=30522, lengths=lengths)
    tags = np.arange(count * length).reshape(count, length)  # per token, trimmed as x
    y = {"start_logits": np.arange(count), "end_logits": tags}
    return x, y, np.array(lengths)


def _assert_same_batches(actual, expected):
    assert len(actual) == len(expected)
    for (x_a, y_a), (x_e, y_e) in zip(actual, expected, strict=True):
        assert x_a.keys() == x_e.keys() and y_a.keys() == y_e.keys()
        for key in x_e:
            np.testing.assert_array_equal(x_a[key], x_e[key])
        for key in y_e:
            np.testing.assert_array_equal(y_a[key], y_e[key])


@pytest.mark.parametrize("bucketing", [True, False])
def test_the_numpy_stream_gives_tf_data_s_batches_in_order_and_resumes_exactly(bucketing):
    x, y, lengths = _stream_data()
    buckets = batching.bucket_lengths(64, bucketing)
    schedule = batching.BatchSchedule(lengths, 4, buckets, seed=7)
    steps = 3 * schedule.steps_per_epoch + 2  # three epochs and into the fourth
    tf_stream = batching.training_stream(x, y, schedule, sequence_targets=True)
    expected = list(tf_stream(0).take(steps).as_numpy_iterator())
    numpy_stream = batching.numpy_stream(x, y, schedule, sequence_targets=True)
    batches = numpy_stream(0)
    actual = [next(batches) for _ in range(steps)]
    _assert_same_batches(actual, expected)
    widths = {batch["token_ids"].shape[1] for batch, _ in actual}
    assert widths <= set(buckets) and (len(widths) > 1) == bucketing
    for inputs, targets in actual:  # the per-token targets are trimmed with the inputs
        assert targets["end_logits"].shape == inputs["token_ids"].shape
    for start in (1, schedule.steps_per_epoch, 2 * schedule.steps_per_epoch + 3):
        tail = batching.numpy_stream(x, y, schedule, sequence_targets=True)(start)
        _assert_same_batches([next(tail) for _ in range(steps - start)], expected[start:])


@pytest.mark.parametrize("task", sorted(TRAIN))
def test_the_adapters_give_the_same_arrays_through_the_host_tokenizer(tiny_preset, task):
    results = {}
    for path in ("graph", "host"):
        with tokenizer_path(path):
            length = 128 if task == "question_answerer" else 64  # 64-token questions
            preprocessor = kbz.BertPreprocessor.from_preset(tiny_preset, sequence_length=length)
            job = FINETUNING_TASKS[task](preprocessor)
            x, y, extra = job.arrays(job.read(TRAIN[task]))
        results[path] = x, y, extra
    (x_graph, y_graph, extra_graph), (x_host, y_host, extra_host) = results.values()
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert x_host[key].dtype == x_graph[key].dtype == np.int32
        np.testing.assert_array_equal(x_host[key], x_graph[key])
    assert (x_graph["padding_mask"].sum(1) > 2).all()  # real text, not only [CLS] [SEP]
    for a, b in zip(keras.tree.flatten(y_host), keras.tree.flatten(y_graph), strict=True):
        np.testing.assert_array_equal(a, b)  # labels, tags or answer positions
    if task == "tagger":
        np.testing.assert_array_equal(extra_host, extra_graph)  # word of each token
    if task == "question_answerer":  # windows and character offsets of each token
        np.testing.assert_array_equal(extra_host.token_offsets, extra_graph.token_offsets)
        np.testing.assert_array_equal(extra_host.example_index, extra_graph.example_index)
        assert len(x_host["token_ids"]) > 106  # doc-stride windows of 106 questions


def test_pairs_pack_the_same_on_both_paths(tiny_preset):
    lines = TRAIN["classifier"].read_text().splitlines()[1:101]
    texts = [line.rsplit("\t", 1)[0] for line in lines]
    packed = []
    for path in ("graph", "host"):
        with tokenizer_path(path):
            preprocessor = kbz.BertPreprocessor.from_preset(tiny_preset, sequence_length=24)
            packed.append(packed_arrays(preprocessor, texts[:50], texts[50:]))
    for key in packed[0]:
        np.testing.assert_array_equal(packed[1][key], packed[0][key])
    assert packed[0]["segment_ids"].max() == 1  # two segments, truncated to 24 tokens


def test_embed_texts_on_the_host_path_gives_the_tensorflow_path_s_vectors(tiny_preset, monkeypatch):
    texts = [line.rsplit("\t", 1)[0] for line in TRAIN["classifier"].read_text().splitlines()]
    embedder, preprocessor = embed.load_embedder(tiny_preset, sequence_length=32)
    expected = embed.embed_texts(embedder, preprocessor, texts[1:80], batch_size=16)
    # JAX and PyTorch's route: the host tokenizer, Keras' predict and its power-of-two buckets
    monkeypatch.setattr(bucketed_prediction, "predicts_as_graph", lambda model: False)
    with tokenizer_path("host"):
        actual = embed.embed_texts(embedder, preprocessor, texts[1:80], batch_size=16)
    assert actual.shape == expected.shape == (79, 32)
    np.testing.assert_allclose(actual, expected, atol=1e-5)
