"""tf.data inputs for the pretrainer: from TFRecord shards, or masked on the fly from text.

Both datasets yield `(x, y, sample_weight)` for `kbz.build_pretrainer`:
`x = {"token_ids", "segment_ids", "padding_mask", "mask_positions"}` (int32),
`y = {"mlm_logits": masked_lm_ids, "nsp_logits": next_sentence_labels}` (int32),
`sample_weight = {"mlm_logits": masked_lm_weights, "nsp_logits": ones}` (float32).

>>> ds = pretraining_dataset("out-*", batch_size=32, max_seq_length=128,
...                          max_predictions_per_seq=20)
"""

import itertools

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.pretraining import instances as data
from keras_bert_zoo.data.pretraining import text
from keras_bert_zoo.data.pretraining.records import feature_spec, instance_features
from keras_bert_zoo.saving.vocabulary import load_vocabulary


def to_model_inputs(features: dict) -> tuple:
    """Original feature names (batched) -> `(x, y, sample_weight)` for the pretrainer."""
    as_int = lambda name: tf.cast(features[name], tf.int32)  # noqa: E731
    x = {
        "token_ids": as_int("input_ids"),
        "segment_ids": as_int("segment_ids"),
        "padding_mask": as_int("input_mask"),
        "mask_positions": as_int("masked_lm_positions"),
    }
    labels = as_int("next_sentence_labels")[:, 0]
    y = {"mlm_logits": as_int("masked_lm_ids"), "nsp_logits": labels}
    weights = {
        "mlm_logits": tf.cast(features["masked_lm_weights"], tf.float32),
        "nsp_logits": tf.ones_like(labels, tf.float32),
    }
    return x, y, weights


def _check_record_shapes(path: str, max_seq_length: int, max_predictions_per_seq: int):
    for record in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        found = (
            len(example["input_ids"].int64_list.value),
            len(example["masked_lm_positions"].int64_list.value),
        )
        if found != (max_seq_length, max_predictions_per_seq):
            raise ValueError(
                f"{path} holds max_seq_length={found[0]}, max_predictions_per_seq"
                f"={found[1]}; pass those (got {max_seq_length}, "
                f"{max_predictions_per_seq})."
            )


def pretraining_dataset(
    file_patterns,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    shuffle: bool = True,
    seed=None,
    repeat: bool = True,
    shuffle_buffer_size: int = 10000,
    cycle_length: int = 8,
) -> tf.data.Dataset:
    """Batches of model inputs from TFRecord shards (ours or google-research/bert's).

    Files are shuffled and read interleaved in parallel; batches drop the remainder.

    >>> x, y, w = next(iter(pretraining_dataset("out-*", 8, 128, 20)))
    """
    files = text.expand_input_patterns(file_patterns)
    _check_record_shapes(files[0], max_seq_length, max_predictions_per_seq)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        min(cycle_length, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=seed is not None or not shuffle,
    )
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = dataset.batch(batch_size, drop_remainder=True).map(
        lambda serialized: to_model_inputs(tf.io.parse_example(serialized, spec)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def _source_lines(source) -> list:
    if isinstance(source, tf.data.Dataset):
        return [line.decode("utf-8") for line in source.as_numpy_iterator()]
    lines = []
    for path in text.expand_input_patterns(source):
        with tf.io.gfile.GFile(path, "rb") as handle:
            lines.extend(handle.read().decode("utf-8").split("\n") + [""])  # file = document end
    return lines


def dynamic_masking_dataset(
    source,
    tokenizer_fn,
    vocabulary,
    batch_size: int,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    do_whole_word_mask: bool = False,
    seed=None,
    repeat: bool = True,
    input_format: str = "sentence_per_line",
    shuffle_buffer_size: int = 10000,
) -> tf.data.Dataset:
    """Model inputs straight from text with fresh NSP pairs and masks on every pass.

    `source`: text file paths/globs, or a `tf.data.Dataset` of lines (blank = document end).
    The text is tokenized once (`tokenizer_fn(list[str])` -> RaggedTensor or id lists);
    pairing and masking then run in a generator inside tf.data with the offline generator's
    code, so the statistics are the same. Pass `seed` for a reproducible sequence of epochs.

    >>> ds = dynamic_masking_dataset("wiki.txt", kbz.BertTokenizer.from_preset(name),
    ...                              "vocab.txt", batch_size=32, seed=1)
    """
    config = data.InstanceConfig(
        max_seq_length,
        max_predictions_per_seq,
        masked_lm_prob,
        short_seq_prob,
        bool(do_whole_word_mask),
    )
    vocab = text.vocabulary_info(load_vocabulary(vocabulary))
    documents = text.documents_from_lines(_source_lines(source), input_format)
    documents = text.tokenize_documents(
        documents, tokenizer_fn, vocab, max_seq_length, "dynamic_masking_dataset source"
    )
    data.check_documents(documents, "dynamic_masking_dataset source")
    base_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
    epochs = itertools.count()

    def generate():  # stacked blocks of instances: far fewer Python -> tf.data crossings
        rng, block = np.random.default_rng([base_seed, next(epochs)]), []
        for index in rng.permutation(len(documents)):
            for instance in data.instances_from_document(documents, index, config, vocab, rng):
                block.append(instance_features(instance, max_seq_length, max_predictions_per_seq))
            if len(block) >= 256:
                yield {name: np.stack([f[name] for f in block]) for name in block[0]}
                block = []
        if block:
            yield {name: np.stack([f[name] for f in block]) for name in block[0]}

    signature = {
        name: tf.TensorSpec([None, *spec.shape], spec.dtype)
        for name, spec in feature_spec(max_seq_length, max_predictions_per_seq).items()
    }
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature).unbatch()
    dataset = dataset.shuffle(shuffle_buffer_size, seed=base_seed % 2**31)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE
    )
