"""BertPreprocessor: BERT packing and truncation, tf.data, saving, SavedModel export."""

import functools
import json
from pathlib import Path

import hypothesis
import hypothesis.strategies as st
import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from conftest import TOKENIZER_PATHS, tokenizer_path
from tokenizers import BertWordPieceTokenizer
from tokenizers.processors import BertProcessing

import keras_bert_zoo as kbz
from keras_bert_zoo.tokenization import BertPreprocessor, BertTokenizer

ROOT = Path(__file__).resolve().parent.parent
UNCASED = str(kbz.presets.builtin_presets_dir() / "vocab" / "uncased.txt")
KEYS = ("token_ids", "segment_ids", "padding_mask")


@functools.cache
def tokenizer():
    return BertTokenizer(UNCASED, lowercase=True)


@functools.cache
def preprocessor(sequence_length):
    return BertPreprocessor(tokenizer(), sequence_length=sequence_length)


def original_bert_packing(a, b, sequence_length, cls=101, sep=102):
    """Google BERT's run_classifier.convert_single_example, with truncate_seq_pair."""
    a, b = list(a), None if b is None else list(b)
    if b is None:
        a = a[: sequence_length - 2]
    else:
        while len(a) + len(b) > sequence_length - 3:
            (a if len(a) > len(b) else b).pop()
    tokens = [cls] + a + [sep] + ([] if b is None else b + [sep])
    segments = [0] * (len(a) + 2) + ([] if b is None else [1] * (len(b) + 1))
    padding = sequence_length - len(tokens)
    return tokens + [0] * padding, segments + [0] * padding, [1] * len(tokens) + [0] * padding


def words(count):
    return " ".join(["the"] * count)  # one token each


def test_single_segment_and_empty_string():
    outputs = preprocessor(8)(tf.constant(["a sentence", "", " ".join(["x"] * 20)]))
    assert set(outputs) == set(KEYS)
    for key in KEYS:
        assert outputs[key].dtype == tf.int32 and outputs[key].shape == (3, 8)
    np.testing.assert_array_equal(
        outputs["token_ids"],
        [
            [101, 1037, 6251, 102, 0, 0, 0, 0],
            [101, 102, 0, 0, 0, 0, 0, 0],  # empty string: [CLS] [SEP]
            [101, 1060, 1060, 1060, 1060, 1060, 1060, 102],
        ],
    )
    np.testing.assert_array_equal(outputs["padding_mask"][1], [1, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(outputs["segment_ids"], np.zeros([3, 8]))


def packed(sequence_length, path, *segments):
    """`preprocessor(sequence_length)` on `path` (TensorFlow ops or numpy) as numpy arrays."""
    with tokenizer_path(path):
        inputs = [tf.constant(s) if path == "graph" else list(s) for s in segments]
        outputs = preprocessor(sequence_length)(tuple(inputs))
    assert all(
        isinstance(v, tf.Tensor if path == "graph" else np.ndarray) for v in outputs.values()
    )
    return {key: np.asarray(value) for key, value in outputs.items()}


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
@pytest.mark.parametrize("sequence_length", [3, 4, 5, 8, 11])
def test_truncation_equals_original_truncate_seq_pair(sequence_length, path):
    lengths = [(i, j) for i in range(0, 12) for j in range(0, 12)]
    first = [words(i) for i, _ in lengths]
    second = [words(j) for _, j in lengths]
    outputs = packed(sequence_length, path, first, second)
    for row, (i, j) in enumerate(lengths):
        expected = original_bert_packing([1996] * i, [1996] * j, sequence_length)
        for key, values in zip(KEYS, expected, strict=True):
            assert outputs[key][row].tolist() == values, (key, i, j)


def test_truncation_keeps_what_keras_hub_multi_segment_packer_keeps():
    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length=9, start_value=101, end_value=102, pad_value=0
    )
    lengths = [(i, j) for i in range(10) for j in range(10)]
    a = tf.ragged.constant([[7] * i for i, _ in lengths], dtype=tf.int32)
    b = tf.ragged.constant([[8] * j for _, j in lengths], dtype=tf.int32)
    expected_ids, expected_segments = tf.function(packer)((a, b))
    outputs = preprocessor(9)(
        (
            tf.constant([" ".join(["a"] * i) for i, _ in lengths]),
            tf.constant([" ".join(["b"] * j) for _, j in lengths]),
        )
    )
    ids = outputs["token_ids"].numpy()
    np.testing.assert_array_equal(
        np.where(ids == 1037, 7, np.where(ids == 1038, 8, ids)), expected_ids
    )
    np.testing.assert_array_equal(outputs["segment_ids"], expected_segments)


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
def test_pairs_equal_tokenizers_longest_first_on_squad(path):
    squad = json.loads((ROOT / "tests/data/squad_v1.1_dev_subset.json").read_text())
    pairs = [
        (qa["question"], paragraph["context"])
        for article in squad["data"]
        for paragraph in article["paragraphs"][:3]
        for qa in paragraph["qas"][:3]
    ]
    reference = BertWordPieceTokenizer(UNCASED, lowercase=True)
    reference.post_processor = BertProcessing(("[SEP]", 102), ("[CLS]", 101))
    reference.enable_truncation(64, strategy="longest_first")
    reference.enable_padding(length=64)
    expected = reference.encode_batch(pairs)
    outputs = packed(64, path, [q for q, _ in pairs], [c for _, c in pairs])
    np.testing.assert_array_equal(outputs["token_ids"], [e.ids for e in expected])
    np.testing.assert_array_equal(outputs["segment_ids"], [e.type_ids for e in expected])
    np.testing.assert_array_equal(outputs["padding_mask"], [e.attention_mask for e in expected])


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    texts=st.lists(st.tuples(st.text(max_size=40), st.text(max_size=40)), min_size=0, max_size=5),
    pair=st.booleans(),
    sequence_length=st.sampled_from([3, 4, 7, 16]),
)
def test_packing_invariants(texts, pair, sequence_length):
    first = tf.constant([a for a, _ in texts], tf.string)
    second = tf.constant([b for _, b in texts], tf.string)
    outputs = preprocessor(sequence_length)((first, second) if pair else first)
    batch = len(texts)
    for key in KEYS:
        assert outputs[key].dtype == tf.int32
        assert outputs[key].shape == (batch, sequence_length)
    ids, segments, mask = (outputs[key].numpy() for key in KEYS)
    for row in range(batch):
        length = int(mask[row].sum())
        assert mask[row].tolist() == [1] * length + [0] * (sequence_length - length)
        assert ids[row, 0] == 101 and ids[row, length - 1] == 102
        assert (ids[row, length:] == 0).all() and (segments[row, length:] == 0).all()
        separators = np.flatnonzero(ids[row, :length] == 102).tolist()
        assert len(separators) == (2 if pair else 1)
        expected_segments = [0] * (separators[0] + 1) + [1] * (length - separators[0] - 1)
        assert segments[row, :length].tolist() == expected_segments
        assert 101 not in ids[row, 1:length].tolist()


def test_unbatched_python_and_two_argument_inputs():
    pre = preprocessor(8)
    single = pre("a sentence")
    assert single["token_ids"].shape == (8,)
    pair = pre(("a question", "a passage"))
    batched = pre((tf.constant(["a question"]), tf.constant(["a passage"])))
    two_arguments = pre(tf.constant(["a question"]), tf.constant(["a passage"]))
    for key in KEYS:
        np.testing.assert_array_equal(pair[key], batched[key][0])
        np.testing.assert_array_equal(two_arguments[key], batched[key])
    np.testing.assert_array_equal(pre(["a sentence"])["token_ids"][0], single["token_ids"])


def test_tf_data_batched_and_unbatched():
    pre = preprocessor(8)
    questions = ["who?", "naïve café", "", "a b c d e f g h i"]
    passages = ["me", "x", "long " * 10, ""]
    expected_single = pre(tf.constant(questions))
    expected_pair = pre((tf.constant(questions), tf.constant(passages)))
    single = tf.data.Dataset.from_tensor_slices(questions)
    pairs = tf.data.Dataset.from_tensor_slices((questions, passages))
    for dataset, expected in ((single, expected_single), (pairs, expected_pair)):
        for mapped in (dataset.map(pre).batch(4), dataset.batch(2).map(pre).rebatch(4)):
            got = next(iter(mapped))
            for key in KEYS:
                np.testing.assert_array_equal(got[key], expected[key])
    labelled = tf.data.Dataset.from_tensor_slices((questions, [0, 1, 0, 1])).batch(2)
    x, y = next(iter(labelled.map(lambda text, label: (pre(text), label))))
    assert x["token_ids"].shape == (2, 8) and y.shape == (2,)


def test_errors_are_clear():
    with pytest.raises(ValueError, match="`sequence_length` must be an integer >= 2"):
        BertPreprocessor(tokenizer(), sequence_length=1)
    with pytest.raises(ValueError, match="`tokenizer` must be a BertTokenizer"):
        BertPreprocessor("vocab.txt", sequence_length=8)
    with pytest.raises(ValueError, match="packs one segment, or two with sequence_length >= 3"):
        preprocessor(8)((tf.constant(["a"]), tf.constant(["b"]), tf.constant(["c"])))
    with pytest.raises(ValueError, match="packs one segment, or two"):
        preprocessor(2)((tf.constant(["a"]), tf.constant(["b"])))
    with pytest.raises(ValueError, match="all be strings .* or all batches"):
        preprocessor(8)((tf.constant("a"), tf.constant(["b"])))
    with pytest.raises(ValueError, match="of one size"):
        preprocessor(8)((tf.constant(["a", "b"]), tf.constant(["b"])))
    with pytest.raises(ValueError, match="expects strings"):
        preprocessor(8)(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="at most the preset's max_sequence_length 512"):
        BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=513)


def test_from_preset_and_empty_batch():
    pre = BertPreprocessor.from_preset("bert_base_en", sequence_length=8)
    assert pre.tokenizer.lowercase is False and pre.sequence_length == 8
    empty = pre(tf.constant([], tf.string))
    assert empty["token_ids"].shape == (0, 8)


def test_keras_model_round_trip(tmp_path):
    """A .keras file with the preprocessor reloads without the vocabulary file."""
    pre = BertPreprocessor(BertTokenizer(UNCASED), sequence_length=16, name="preprocessor")
    inputs = keras.Input(shape=(), dtype="string")
    packed = pre(inputs)
    outputs = keras.layers.Embedding(30522, 4)(packed["token_ids"])
    model = keras.Model(inputs, outputs)
    texts = tf.constant(["Hello world!", "naïve café [MASK]"])
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(restored(texts), model(texts))
    config = restored.get_layer("preprocessor").get_config()
    assert config["sequence_length"] == 16
    clone = BertPreprocessor.from_config(json.loads(json.dumps(pre.get_config())))
    np.testing.assert_array_equal(clone(texts)["token_ids"], pre(texts)["token_ids"])


def test_saved_model_export_uses_servable_ops(tmp_path):
    pre = preprocessor(16)

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.preprocessor = pre

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
        def serve(self, question, passage):
            packed = pre((question, passage))
            _, starts, ends = pre.tokenizer.tokenize_with_offsets(passage)
            return {**packed, "starts": starts.to_tensor(), "ends": ends.to_tensor()}

    module = Serving()
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    question, passage = tf.constant(["who?"]), tf.constant(["naïve café"])
    got, expected = restored.serve(question, passage), module.serve(question, passage)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])
    graph = module.serve.get_concrete_function().graph.as_graph_def()
    ops = {node.op for node in graph.node}
    ops |= {node.op for function in graph.library.function for node in function.node_def}
    assert "PyFunc" not in ops and "EagerPyFunc" not in ops
    assert {op for op in ops if op.startswith("TFText") or "Wordpiece" in op} == {
        "FastWordpieceTokenizeWithOffsets"
    }
