"""Pretraining records: TFRecord shards in google-research/bert's schema, and tf.data inputs.

Both datasets yield `(x, y, sample_weight)` for `kbz.build_pretrainer`:
`x = {"token_ids", "segment_ids", "padding_mask", "mask_positions"}` (int32),
`y = {"mlm_logits": masked_lm_ids, "nsp_logits": next_sentence_labels}` (int32),
`sample_weight = {"mlm_logits": masked_lm_weights, "nsp_logits": ones}` (float32).

>>> ds = pretraining_dataset("out-*", batch_size=32, max_seq_length=128,
...                          max_predictions_per_seq=20)
"""

import concurrent.futures
import itertools
import logging
import multiprocessing
import os
import re

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from keras_bert_zoo import pretraining_data as data
from keras_bert_zoo import pretraining_text as text
from keras_bert_zoo.vocabulary import load_vocabulary

logger = logging.getLogger(__name__)

_SHARDED = re.compile(r"^(.+)@(\d+)$")


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """google-research/bert's `name_to_features` (run_pretraining.py)."""
    ints = lambda n: tf.io.FixedLenFeature([n], tf.int64)  # noqa: E731
    return {"input_ids": ints(max_seq_length), "input_mask": ints(max_seq_length),
            "segment_ids": ints(max_seq_length),
            "masked_lm_positions": ints(max_predictions_per_seq),
            "masked_lm_ids": ints(max_predictions_per_seq),
            "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
            "next_sentence_labels": ints(1)}


def _pad(values, length: int, dtype) -> np.ndarray:
    padded = np.zeros(length, dtype)
    padded[:len(values)] = values
    return padded


def instance_features(instance: data.Instance, max_seq_length: int,
                      max_predictions_per_seq: int) -> dict:
    """An instance as padded NumPy arrays keyed by the original feature names."""
    predictions = len(instance.masked_positions)
    return {"input_ids": _pad(instance.token_ids, max_seq_length, np.int64),
            "input_mask": _pad(np.ones(len(instance.token_ids)), max_seq_length, np.int64),
            "segment_ids": _pad(instance.segment_ids, max_seq_length, np.int64),
            "masked_lm_positions": _pad(instance.masked_positions, max_predictions_per_seq,
                                        np.int64),
            "masked_lm_ids": _pad(instance.masked_ids, max_predictions_per_seq, np.int64),
            "masked_lm_weights": _pad(np.ones(predictions), max_predictions_per_seq, np.float32),
            "next_sentence_labels": np.array([int(instance.is_random_next)], np.int64)}


def serialize_instance(instance: data.Instance, max_seq_length: int,
                       max_predictions_per_seq: int) -> bytes:
    """A `tf.train.Example` (int64 lists; float list for `masked_lm_weights`), serialized."""
    features = {}
    for name, values in instance_features(instance, max_seq_length,
                                          max_predictions_per_seq).items():
        if values.dtype == np.float32:
            features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)  # sorted map keys: reproducible


def expand_output_files(output_file, input_files=()) -> list:
    """Comma-separated paths (or a list); `path@N` means `path-0000i-of-0000N`."""
    if isinstance(output_file, (str, os.PathLike)):
        output_file = str(output_file).split(",")
    outputs = []
    for item in (str(o).strip() for o in output_file):
        sharded = _SHARDED.match(item)
        count = int(sharded.group(2)) if sharded else 0
        if sharded and count < 1:
            raise ValueError(f"--output_file {item}: the shard count must be >= 1.")
        outputs.extend([f"{sharded.group(1)}-{i:05d}-of-{count:05d}" for i in range(count)]
                       if sharded else [item])
    if not all(outputs) or len(set(outputs)) != len(outputs):
        raise ValueError(f"--output_file {output_file}: empty or repeated file names.")
    clobbered = {os.path.abspath(p) for p in outputs} & {os.path.abspath(p) for p in input_files}
    if clobbered:
        raise ValueError(f"--output_file would overwrite the input {sorted(clobbered)[0]}.")
    return outputs


def _temporary(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}"


def check_writable(outputs: list) -> None:
    """Creates missing output folders and probes them, before any long work."""
    for directory in sorted({os.path.dirname(p) or "." for p in outputs}):
        probe = _temporary(os.path.join(directory, ".kbz-write-probe"))
        try:
            tf.io.gfile.makedirs(directory)
            with tf.io.gfile.GFile(probe, "wb") as handle:
                handle.write(b"probe")
            tf.io.gfile.remove(probe)
        except (OSError, tf.errors.OpError) as error:
            raise OSError(f"Cannot write to output directory {directory!r} (--output_file): "
                          f"{getattr(error, 'message', error)}") from error


def write_instance_files(serialized: list, outputs: list) -> None:
    """Writes serialized instances round-robin to `outputs`, via temporary names renamed last.

    On any failure (disk full, permissions) the temporary files are removed and nothing is
    left at the output paths; the error names the file.
    """
    temporaries = [_temporary(path) for path in outputs]
    writers, current = [], outputs[0]
    try:
        for path, temporary in zip(outputs, temporaries, strict=True):
            current = path
            writers.append(tf.io.TFRecordWriter(temporary))
        for index, record in enumerate(tqdm(serialized, desc="write", unit="instance",
                                            disable=None)):
            current = outputs[index % len(writers)]
            writers[index % len(writers)].write(record)
        for path, writer in zip(outputs, writers, strict=True):
            current = path
            writer.close()
        for path, temporary in zip(outputs, temporaries, strict=True):
            current = path
            tf.io.gfile.rename(temporary, path, overwrite=True)
    except (OSError, tf.errors.OpError) as error:
        for writer in writers:
            try:
                writer.close()
            except (OSError, tf.errors.OpError):
                pass
        for temporary in temporaries:
            if tf.io.gfile.exists(temporary):
                tf.io.gfile.remove(temporary)
        raise OSError(f"Could not write {current}: {getattr(error, 'message', error)}. No "
                      "partial shard was left; free disk space or choose another "
                      "--output_file.") from error


def _serialized_file_instances(task: tuple) -> list:
    config = task[2]
    return [serialize_instance(instance, config.max_seq_length, config.max_predictions_per_seq)
            for instance in data.file_instances(*task)]


def serialized_instances(documents_by_file: list, config: data.InstanceConfig,
                         vocab: text.VocabularyInfo, dupe_factor: int, random_seed: int,
                         num_workers: int | None = None, source: str = "input") -> list:
    """Serialized instances of all files, shuffled; the same for any `num_workers`.

    Each file gets its own random stream (from `random_seed`) and draws random next
    segments from its own documents (from all files' if it has only one), so files are
    processed in parallel worker processes. Default workers: 1 below 2M tokens.
    """
    if dupe_factor < 1:
        raise ValueError(f"--dupe_factor={dupe_factor} must be >= 1.")
    everything = [document for documents in documents_by_file for document in documents]
    data.check_documents(everything, source)
    seeds = np.random.SeedSequence(random_seed).spawn(len(documents_by_file) + 1)
    tasks, offset = [], 0
    for documents, seed in zip(documents_by_file, seeds[:-1], strict=True):
        own = len(documents) > 1
        tasks.append((documents if own else everything,
                      range(len(documents)) if own else range(offset, offset + 1),
                      config, vocab, dupe_factor, seed))
        offset += len(documents)
    tokens = sum(len(s) for document in everything for s in document)
    workers = num_workers or ((os.cpu_count() or 1) if tokens > 2_000_000 else 1)
    workers = min(workers, sum(task[0] is not everything for task in tasks))
    results = [None] * len(tasks)
    with tqdm(total=len(tasks), desc="instances", unit="file", disable=None) as bar, \
            _executor(workers) as pool:
        futures = {pool.submit(_serialized_file_instances, task): i
                   for i, task in enumerate(tasks) if task[0] is not everything}
        for i, task in enumerate(tasks):
            if task[0] is everything:  # not shipped to a worker: the whole corpus is its pool
                results[i] = _serialized_file_instances(task)
                bar.update()
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()
            bar.update()
    serialized = [record for result in results for record in result]
    return [serialized[i] for i in np.random.default_rng(seeds[-1]).permutation(len(serialized))]


class _InlineExecutor(concurrent.futures.Executor):
    def submit(self, fn, *args, **kwargs):
        future = concurrent.futures.Future()
        future.set_result(fn(*args, **kwargs))
        return future


def _executor(workers: int) -> concurrent.futures.Executor:
    if workers <= 1:
        return _InlineExecutor()
    return concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"))


def to_model_inputs(features: dict) -> tuple:
    """Original feature names (batched) -> `(x, y, sample_weight)` for the pretrainer."""
    as_int = lambda name: tf.cast(features[name], tf.int32)  # noqa: E731
    x = {"token_ids": as_int("input_ids"), "segment_ids": as_int("segment_ids"),
         "padding_mask": as_int("input_mask"), "mask_positions": as_int("masked_lm_positions")}
    labels = as_int("next_sentence_labels")[:, 0]
    y = {"mlm_logits": as_int("masked_lm_ids"), "nsp_logits": labels}
    weights = {"mlm_logits": tf.cast(features["masked_lm_weights"], tf.float32),
               "nsp_logits": tf.ones_like(labels, tf.float32)}
    return x, y, weights


def _check_record_shapes(path: str, max_seq_length: int, max_predictions_per_seq: int):
    for record in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        found = (len(example["input_ids"].int64_list.value),
                 len(example["masked_lm_positions"].int64_list.value))
        if found != (max_seq_length, max_predictions_per_seq):
            raise ValueError(f"{path} holds max_seq_length={found[0]}, max_predictions_per_seq"
                             f"={found[1]}; pass those (got {max_seq_length}, "
                             f"{max_predictions_per_seq}).")


def pretraining_dataset(file_patterns, batch_size: int, max_seq_length: int,
                        max_predictions_per_seq: int, shuffle: bool = True, seed=None,
                        repeat: bool = True, shuffle_buffer_size: int = 10000,
                        cycle_length: int = 8) -> tf.data.Dataset:
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
    dataset = dataset.interleave(tf.data.TFRecordDataset, min(cycle_length, len(files)),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed
                                 is not None or not shuffle)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = dataset.batch(batch_size, drop_remainder=True).map(
        lambda serialized: to_model_inputs(tf.io.parse_example(serialized, spec)),
        num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _source_lines(source) -> list:
    if isinstance(source, tf.data.Dataset):
        return [line.decode("utf-8") for line in source.as_numpy_iterator()]
    lines = []
    for path in text.expand_input_patterns(source):
        with tf.io.gfile.GFile(path, "rb") as handle:
            lines.extend(handle.read().decode("utf-8").split("\n") + [""])  # file = document end
    return lines


def dynamic_masking_dataset(source, tokenizer_fn, vocabulary, batch_size: int,
                            max_seq_length: int = 128, max_predictions_per_seq: int = 20,
                            masked_lm_prob: float = 0.15, short_seq_prob: float = 0.1,
                            do_whole_word_mask: bool = False, seed=None, repeat: bool = True,
                            input_format: str = "sentence_per_line",
                            shuffle_buffer_size: int = 10000) -> tf.data.Dataset:
    """Model inputs straight from text with fresh NSP pairs and masks on every pass.

    `source`: text file paths/globs, or a `tf.data.Dataset` of lines (blank = document end).
    The text is tokenized once (`tokenizer_fn(list[str])` -> RaggedTensor or id lists);
    pairing and masking then run in a generator inside tf.data with the offline generator's
    code, so the statistics are the same. Pass `seed` for a reproducible sequence of epochs.

    >>> ds = dynamic_masking_dataset("wiki.txt", kbz.BertTokenizer.from_preset(name),
    ...                              "vocab.txt", batch_size=32, seed=1)
    """
    config = data.InstanceConfig(max_seq_length, max_predictions_per_seq, masked_lm_prob,
                                 short_seq_prob, bool(do_whole_word_mask))
    vocab = text.vocabulary_info(load_vocabulary(vocabulary))
    documents = text.documents_from_lines(_source_lines(source), input_format)
    documents = text.tokenize_documents(documents, tokenizer_fn, vocab, max_seq_length,
                                        "dynamic_masking_dataset source")
    data.check_documents(documents, "dynamic_masking_dataset source")
    base_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
    epochs = itertools.count()

    def generate():  # stacked blocks of instances: far fewer Python -> tf.data crossings
        rng, block = np.random.default_rng([base_seed, next(epochs)]), []
        for index in rng.permutation(len(documents)):
            for instance in data.instances_from_document(documents, index, config, vocab, rng):
                block.append(instance_features(instance, max_seq_length,
                                               max_predictions_per_seq))
            if len(block) >= 256:
                yield {name: np.stack([f[name] for f in block]) for name in block[0]}
                block = []
        if block:
            yield {name: np.stack([f[name] for f in block]) for name in block[0]}

    signature = {name: tf.TensorSpec([None, *spec.shape], spec.dtype) for name, spec in
                 feature_spec(max_seq_length, max_predictions_per_seq).items()}
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature).unbatch()
    dataset = dataset.shuffle(shuffle_buffer_size, seed=base_seed % 2**31)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
        tf.data.AUTOTUNE)
