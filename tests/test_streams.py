"""Pretraining inputs positioned by step: `stream(s)` gives exactly the batches that
`stream(0)` gives from step `s` on, without producing the ones before (resume without
replay), for TFRecord shards (`RecordStream`) and dynamic masking from text
(`MaskingStream`)."""

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tokenizers import BertWordPieceTokenizer

from keras_bert_zoo.data.pretraining import MaskingStream, RecordStream, records
from keras_bert_zoo.presets import builtin_presets_dir

DATA = Path(__file__).parent / "data" / "pretraining"
VOCAB = builtin_presets_dir() / "vocab" / "uncased.txt"
L, P = 16, 3
SHARDS = (37, 101, 12)  # records per shard: uneven, so passes and windows cross shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three shards of records numbered 0..149 (the number is `input_ids[1]`)."""
    directory, number = tmp_path_factory.mktemp("shards"), 0
    for shard, count in enumerate(SHARDS):
        with tf.io.TFRecordWriter(str(directory / f"part-{shard}.tfrecord")) as writer:
            for _ in range(count):
                ids = np.zeros(L, np.int64)
                ids[:3] = [101, number, 102]
                feature = {
                    name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
                    for name in ("input_ids", "input_mask", "segment_ids")
                }
                feature.update(
                    {
                        name: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * n))
                        for name, n in (
                            ("masked_lm_positions", P),
                            ("masked_lm_ids", P),
                            ("next_sentence_labels", 1),
                        )
                    }
                )
                feature["masked_lm_weights"] = tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0] * P)
                )
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
                number += 1
    assert records.feature_spec(L, P)  # the schema the stream parses
    return str(directory / "part-*.tfrecord")


def _numbers(dataset, batches: int) -> np.ndarray:
    return np.stack([x["token_ids"].numpy()[:, 1] for x, _, _ in dataset.take(batches)])


def test_a_record_pass_reads_every_record_once_in_a_new_seeded_order(shards):
    stream = RecordStream(shards, 1, L, P, seed=5, shuffle_buffer_size=20)
    passes = _numbers(stream(0), 3 * sum(SHARDS)).reshape(3, -1)
    for one in passes:
        assert sorted(one) == list(range(sum(SHARDS)))  # a permutation of the records
    assert not np.array_equal(passes[0], passes[1]) and not np.array_equal(passes[1], passes[2])
    again = RecordStream(shards, 1, L, P, seed=5, shuffle_buffer_size=20)
    np.testing.assert_array_equal(_numbers(again(0), sum(SHARDS)).ravel(), passes[0])
    other = RecordStream(shards, 1, L, P, seed=6, shuffle_buffer_size=20)
    assert not np.array_equal(_numbers(other(0), sum(SHARDS)).ravel(), passes[0])
    plain = RecordStream(shards, 1, L, P, shuffle=False, repeat=False)
    assert _numbers(plain(0), sum(SHARDS)).ravel().tolist() == list(range(sum(SHARDS)))


@pytest.mark.parametrize("start", [1, 4, 11, 18, 37, 40])  # 150 records = 18.75 batches of 8
def test_a_record_stream_started_at_a_step_equals_the_stream_from_zero(shards, start):
    stream = RecordStream(shards, 8, L, P, seed=1, shuffle_buffer_size=20)
    whole = _numbers(stream(0), start + 5)
    np.testing.assert_array_equal(_numbers(stream(start), 5), whole[start:])


def test_a_record_stream_without_repeat_refuses_a_step_past_its_end(shards):
    stream = RecordStream(shards, 8, L, P, seed=1, repeat=False)
    assert len(list(stream(0))) == sum(SHARDS) // 8
    with pytest.raises(ValueError, match="start_step 19 is past the end of the data"):
        stream(19)


@pytest.fixture(scope="module")
def masking():
    wordpiece = BertWordPieceTokenizer(str(VOCAB), lowercase=True)

    def tokenize(lines):
        return [e.ids for e in wordpiece.encode_batch(lines, add_special_tokens=False)]

    return MaskingStream(
        str(DATA / "sentences.txt"), tokenize, VOCAB, 16, max_seq_length=32,
        max_predictions_per_seq=5, seed=3,
    )  # fmt: skip


def _batches(dataset, count: int) -> list:
    return [
        np.concatenate([x["token_ids"], x["mask_positions"], y["mlm_logits"]], axis=1)
        for x, y, _ in dataset.take(count)
    ]


def test_a_masking_stream_started_at_a_step_equals_the_stream_from_zero(masking):
    per_pass = len(masking.chunks) // 16  # steps per pass over the text (batches of 16)
    starts = [1, per_pass - 1, 2 * per_pass + 1]  # inside, across the end, two passes on
    whole = _batches(masking(0), starts[-1] + 3)
    for start in starts:
        np.testing.assert_array_equal(np.stack(_batches(masking(start), 3)), whole[start:][:3])


def test_a_masking_stream_positions_without_making_the_pairs_before(masking, monkeypatch):
    made = []
    original = MaskingStream.instance
    monkeypatch.setattr(
        MaskingStream, "instance", lambda self, e, c: made.append(e) or original(self, e, c)
    )
    first = _batches(masking(1_000_000), 1)[0]  # 16 million pairs in: pass 16e6 // chunks
    assert len(made) < 20_000 and min(made) == 16_000_000 // len(masking.chunks)
    assert first.shape == (16, 32 + 5 + 5)


def test_a_masking_stream_s_tf_data_batches_equal_its_numpy_batches(masking):
    # The TensorFlow backend feeds the tf.data path, JAX and PyTorch the numpy one: one stream.
    per_pass = len(masking.chunks) // 16
    for start in [0, per_pass - 2]:  # from scratch, and a resume whose 4 batches cross a pass
        dataset = masking(start)
        assert isinstance(dataset, tf.data.Dataset)
        batches = list(zip(dataset.take(4), masking.batches(start), strict=False))
        assert len(batches) == 4
        for ours, theirs in batches:
            for got, expected in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs), strict=True):
                assert isinstance(expected, np.ndarray) and got.dtype == expected.dtype
                np.testing.assert_array_equal(got.numpy(), expected)
    x, y, weights = next(masking.batches(per_pass - 2))
    assert {v.dtype for v in [*x.values(), *y.values()]} == {np.dtype("int32")}
    assert {v.dtype for v in weights.values()} == {np.dtype("float32")}
    assert x["token_ids"].shape == (16, 32) and y["nsp_logits"].shape == (16,)
