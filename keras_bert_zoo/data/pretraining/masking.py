"""Dynamic masking: pretrainer batches made on the fly from text, positioned by step.

The text is tokenized once and cut into chunks of consecutive sentences once
(`instances.document_chunks`, seeded). Pass `e` over the data visits the chunks in an order
drawn from (seed, e) and makes each chunk's pair (A/B split, next-sentence choice, masks)
with an rng drawn from (seed, e, chunk), with the offline generator's code, so every pass
has fresh pairs and masks with the same statistics, and the instance at any position is
computed without the ones before it: `MaskingStream(...)(start_step)` starts at once at any
step (resume in constant time). The chunk order per pass replaces the earlier
document order plus a 10,000-instance shuffle buffer, whose state depended on history.

The batches are made in numpy (`batches`, through `features.model_inputs`): off TensorFlow
`fit` takes them as they are (`kbz pretrain --text-file` needs no TensorFlow); on the
TensorFlow backend a tf.data generator wraps the same batches.

>>> stream = MaskingStream("wiki.txt", kbz.BertTokenizer.from_preset(name), "vocab.txt",
...                        batch_size=32, seed=1)
>>> resumed = stream(start_step=5000)
"""

import itertools

import keras
import numpy as np

from keras_bert_zoo.data.pretraining import instances as data
from keras_bert_zoo.data.pretraining import text
from keras_bert_zoo.data.pretraining.features import (
    feature_shapes,
    instance_features,
    locate,
    model_inputs,
    stream_seed,
)
from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow
from keras_bert_zoo.saving.vocabulary import load_vocabulary

# Keras on TensorFlow imported it already; other backends take the numpy batches themselves.
tf = require_tensorflow(TF_DATA_PIPELINES) if keras.backend.backend() == "tensorflow" else None


def _source_lines(source) -> list:
    if hasattr(source, "as_numpy_iterator"):  # a tf.data.Dataset of lines
        return [line.decode("utf-8") for line in source.as_numpy_iterator()]
    lines = []
    for path in text.expand_input_patterns(source):
        lines.extend(text.read_text(path).split("\n") + [""])  # a file ends a document
    return lines


class MaskingStream:
    """`start_step -> batches` of model inputs masked on the fly from text: a tf.data
    dataset on the TensorFlow backend, an iterator of numpy batches on the others (the same
    batches: `batches` makes them, the dataset wraps it).

    `source`: text file paths/globs, or a `tf.data.Dataset` of lines (blank = document end);
    `tokenizer_fn(list[str])`: a `kbz.BertTokenizer`, or any callable giving id lists. With
    `repeat=False` the batches from step 0 are one pass, a new one each time they are iterated.
    """

    def __init__(
        self,
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
    ):
        self.config = data.InstanceConfig(
            max_seq_length,
            max_predictions_per_seq,
            masked_lm_prob,
            short_seq_prob,
            bool(do_whole_word_mask),
        )
        self.vocab = text.vocabulary_info(load_vocabulary(vocabulary))
        documents = text.documents_from_lines(_source_lines(source), input_format)
        self.documents = text.tokenize_documents(
            documents, tokenizer_fn, self.vocab, max_seq_length, "dynamic_masking_dataset source"
        )
        data.check_documents(self.documents, "dynamic_masking_dataset source")
        self.batch_size, self.repeat, self.seed = batch_size, repeat, stream_seed(seed)
        rng = np.random.default_rng([self.seed, 0])
        self.chunks = data.document_chunks(self.documents, self.config, rng)
        self._passes = itertools.count()  # repeat=False: the pass of the next iteration

    def instance(self, epoch: int, chunk: int) -> dict:
        """The features of `chunk`'s pair in pass `epoch` (padded, original names)."""
        rng = np.random.default_rng([self.seed, 2, epoch, chunk])
        made = data.instance_from_chunk(
            self.documents, self.chunks[chunk], self.config, self.vocab, rng
        )
        return instance_features(
            made, self.config.max_seq_length, self.config.max_predictions_per_seq
        )

    def batches(self, start_step: int = 0):
        """The numpy batches from `start_step` on: an iterator of `(x, y, sample_weight)`
        (`features.model_inputs`), what `self(start_step)` gives off TensorFlow."""
        return self._batches(start_step, *self._locate(start_step))

    def _locate(self, start_step: int) -> tuple[int, int]:
        epoch, position = locate(start_step, self.batch_size, lambda: len(self.chunks), True)
        if not self.repeat and epoch:
            raise ValueError(f"start_step {start_step} is past one pass (repeat=False).")
        return epoch, position

    def _batches(self, start_step: int, epoch: int, position: int):
        if not self.repeat and not start_step:
            epoch = next(self._passes)  # drawn when iterated: a new pass each time
        rows = []
        for e in itertools.count(epoch) if self.repeat else [epoch]:
            order = np.random.default_rng([self.seed, 1, e]).permutation(len(self.chunks))
            for chunk in order[position if e == epoch else 0 :]:
                rows.append(self.instance(e, int(chunk)))
                if len(rows) == self.batch_size:  # the remainder of a last pass is dropped
                    yield model_inputs(
                        {name: np.stack([r[name] for r in rows]) for name in rows[0]}
                    )
                    rows = []

    def __call__(self, start_step: int = 0):
        """Batches from `start_step` on: a `tf.data.Dataset` on the TensorFlow backend (a
        generator of `batches`), `batches(start_step)` itself on the others."""
        epoch, position = self._locate(start_step)
        if tf is None:
            return self._batches(start_step, epoch, position)
        config = self.config
        shapes = feature_shapes(config.max_seq_length, config.max_predictions_per_seq)
        zeros = {name: np.zeros((self.batch_size, n), dtype) for name, (n, dtype) in shapes.items()}
        signature = tf.nest.map_structure(
            lambda a: tf.TensorSpec(a.shape, a.dtype), model_inputs(zeros)
        )
        dataset = tf.data.Dataset.from_generator(
            lambda: self._batches(start_step, epoch, position), output_signature=signature
        )
        return dataset.prefetch(tf.data.AUTOTUNE)


def dynamic_masking_dataset(source, tokenizer_fn, vocabulary, batch_size: int, **options):
    """Model inputs straight from text with fresh NSP pairs and masks on every pass:
    `MaskingStream(source, tokenizer_fn, vocabulary, batch_size, **options)(0)`.

    Options: `max_seq_length`, `max_predictions_per_seq`, `masked_lm_prob`, `short_seq_prob`,
    `do_whole_word_mask`, `seed` (a reproducible sequence of passes), `repeat`, `input_format`.

    >>> ds = dynamic_masking_dataset("wiki.txt", kbz.BertTokenizer.from_preset(name),
    ...                              "vocab.txt", batch_size=32, seed=1)
    """
    return MaskingStream(source, tokenizer_fn, vocabulary, batch_size, **options)(0)
