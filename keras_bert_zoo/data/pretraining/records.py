"""Pretraining records: instances serialized in google-research/bert's TFRecord schema.

Feature names and types are the original's (`input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`), so
shards interoperate with google-research/bert's `run_pretraining.py`. Shards are written
through temporary files and renamed into place (`write_instance_files`). The numpy features
themselves are `features.instance_features`; TensorFlow is imported by the functions that
need it, so an install without it still reads this module (and raises `MissingExtraError`
only when a TFRecord is to be made).

>>> spec = feature_spec(max_seq_length=128, max_predictions_per_seq=20)
"""

import concurrent.futures
import logging
import multiprocessing
import os
import re

import numpy as np
from tqdm.auto import tqdm

from keras_bert_zoo.data.pretraining import instances as data
from keras_bert_zoo.data.pretraining import text
from keras_bert_zoo.data.pretraining.features import feature_shapes, instance_features
from keras_bert_zoo.extras import TF_RECORDS, require_tensorflow
from keras_bert_zoo.saving.atomic import fsync_path
from keras_bert_zoo.saving.ownership import check_apart

logger = logging.getLogger(__name__)

_SHARDED = re.compile(r"^(.+)@(\d+)$")


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """google-research/bert's `name_to_features` (run_pretraining.py) for `tf.io.parse_example`."""
    tf = require_tensorflow(TF_RECORDS)
    return {
        name: tf.io.FixedLenFeature([length], tf.as_dtype(dtype))
        for name, (length, dtype) in feature_shapes(max_seq_length, max_predictions_per_seq).items()
    }


def serialize_instance(
    instance: data.Instance, max_seq_length: int, max_predictions_per_seq: int
) -> bytes:
    """A `tf.train.Example` (int64 lists; float list for `masked_lm_weights`), serialized."""
    tf, features = require_tensorflow(TF_RECORDS), {}
    for name, values in instance_features(
        instance, max_seq_length, max_predictions_per_seq
    ).items():
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
        outputs.extend(
            [f"{sharded.group(1)}-{i:05d}-of-{count:05d}" for i in range(count)]
            if sharded
            else [item]
        )
    if not all(outputs) or len(set(outputs)) != len(outputs):
        raise ValueError(f"--output_file {output_file}: empty or repeated file names.")
    check_apart({"--output_file": outputs}, {"--input_file": input_files})
    return outputs


def _temporary(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}"


def check_writable(outputs: list) -> None:
    """Creates missing output folders and probes them, before any long work."""
    tf = require_tensorflow(TF_RECORDS)
    for directory in sorted({os.path.dirname(p) or "." for p in outputs}):
        probe = _temporary(os.path.join(directory, ".kbz-write-probe"))
        try:
            tf.io.gfile.makedirs(directory)
            with tf.io.gfile.GFile(probe, "wb") as handle:
                handle.write(b"probe")
            tf.io.gfile.remove(probe)
        except (OSError, tf.errors.OpError) as error:
            raise OSError(
                f"Cannot write to output directory {directory!r} (--output_file): "
                f"{getattr(error, 'message', error)}"
            ) from error


def write_instance_files(serialized: list, outputs: list) -> None:
    """Writes serialized instances round-robin to `outputs`, via temporary names renamed last
    (local files are flushed to disk first, as `saving.atomic` does; `tf.io.gfile` paths such
    as `gs://` are renamed by their file system).

    On any failure (disk full, permissions) the temporary files are removed and nothing is
    left at the output paths; the error names the file.
    """
    tf, temporaries = require_tensorflow(TF_RECORDS), [_temporary(path) for path in outputs]
    writers, current = [], outputs[0]
    try:
        for path, temporary in zip(outputs, temporaries, strict=True):
            current = path
            writers.append(tf.io.TFRecordWriter(temporary))
        for index, record in enumerate(
            tqdm(serialized, desc="write", unit="instance", disable=None)
        ):
            current = outputs[index % len(writers)]
            writers[index % len(writers)].write(record)
        for path, writer in zip(outputs, writers, strict=True):
            current = path
            writer.close()
        for path, temporary in zip(outputs, temporaries, strict=True):
            current = path
            if "://" not in temporary:  # a local file: on disk before its final name
                fsync_path(temporary)
            tf.io.gfile.rename(temporary, path, overwrite=True)
            if "://" not in path:
                fsync_path(os.path.dirname(path) or ".")
    except (OSError, tf.errors.OpError) as error:
        for writer in writers:
            try:
                writer.close()
            except (OSError, tf.errors.OpError):
                pass
        for temporary in temporaries:
            if tf.io.gfile.exists(temporary):
                tf.io.gfile.remove(temporary)
        raise OSError(
            f"Could not write {current}: {getattr(error, 'message', error)}. No "
            "partial shard was left; free disk space or choose another "
            "--output_file."
        ) from error


def _serialized_file_instances(task: tuple) -> list:
    config = task[2]
    return [
        serialize_instance(instance, config.max_seq_length, config.max_predictions_per_seq)
        for instance in data.file_instances(*task)
    ]


def serialized_instances(
    documents_by_file: list,
    config: data.InstanceConfig,
    vocab: text.VocabularyInfo,
    dupe_factor: int,
    random_seed: int,
    num_workers: int | None = None,
    source: str = "input",
) -> list:
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
        tasks.append(
            (
                documents if own else everything,
                range(len(documents)) if own else range(offset, offset + 1),
                config,
                vocab,
                dupe_factor,
                seed,
            )
        )
        offset += len(documents)
    tokens = sum(len(s) for document in everything for s in document)
    workers = num_workers or ((os.cpu_count() or 1) if tokens > 2_000_000 else 1)
    workers = min(workers, sum(task[0] is not everything for task in tasks))
    results = [None] * len(tasks)
    with (
        tqdm(total=len(tasks), desc="instances", unit="file", disable=None) as bar,
        _executor(workers) as pool,
    ):
        futures = {
            pool.submit(_serialized_file_instances, task): i
            for i, task in enumerate(tasks)
            if task[0] is not everything
        }
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
        workers, mp_context=multiprocessing.get_context("spawn")
    )
