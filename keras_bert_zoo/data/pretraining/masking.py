"""Dynamic masking: pretrainer batches made on the fly from text, positioned by step.

The text is tokenized once and cut into chunks of consecutive sentences once
(`instances.document_chunks`, seeded). Pass `e` over the data visits the chunks in an order
drawn from (seed, e) and makes each chunk's pair (A/B split, next-sentence choice, masks)
with an rng drawn from (seed, e, chunk), with the offline generator's code, so every pass
has fresh pairs and masks with the same statistics, and the instance at any position is
computed without the ones before it: `MaskingStream(...)(start_step)` starts at once at any
step (resume in constant time). The chunk order per pass replaces the earlier
document order plus a 10,000-instance shuffle buffer, whose state depended on history.

>>> stream = MaskingStream("wiki.txt", kbz.BertTokenizer.from_preset(name), "vocab.txt",
...                        batch_size=32, seed=1)
>>> resumed = stream(start_step=5000)
"""

import itertools

import numpy as np

from keras_bert_zoo.data.pretraining import instances as data
from keras_bert_zoo.data.pretraining import text
from keras_bert_zoo.data.pretraining.datasets import batches, locate, stream_seed
from keras_bert_zoo.data.pretraining.records import feature_spec, instance_features
from keras_bert_zoo.data.readers import gunzip
from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow
from keras_bert_zoo.saving.vocabulary import load_vocabulary

tf = require_tensorflow(TF_DATA_PIPELINES)

_BLOCK = 256  # instances per generator yield: far fewer Python -> tf.data crossings


def _source_lines(source) -> list:
    if isinstance(source, tf.data.Dataset):
        return [line.decode("utf-8") for line in source.as_numpy_iterator()]
    lines = []
    for path in text.expand_input_patterns(source):
        with tf.io.gfile.GFile(path, "rb") as handle:
            content = gunzip(handle.read()).decode("utf-8")  # .gz read transparently
            lines.extend(content.split("\n") + [""])  # a file ends a document
    return lines


class MaskingStream:
    """`start_step -> dataset` of model-input batches masked on the fly from text.

    `source`: text file paths/globs, or a `tf.data.Dataset` of lines (blank = document end);
    `tokenizer_fn(list[str])` -> RaggedTensor or id lists. With `repeat=False` a dataset
    from step 0 gives one pass per iteration, a new pass each time it is iterated.
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

    def _blocks(self, epoch: int, position: int):
        block = []
        for e in itertools.count(epoch) if self.repeat else [epoch]:
            order = np.random.default_rng([self.seed, 1, e]).permutation(len(self.chunks))
            for chunk in order[position if e == epoch else 0 :]:
                block.append(self.instance(e, int(chunk)))
                if len(block) >= _BLOCK:
                    yield {name: np.stack([f[name] for f in block]) for name in block[0]}
                    block = []
        if block:
            yield {name: np.stack([f[name] for f in block]) for name in block[0]}

    def __call__(self, start_step: int = 0) -> tf.data.Dataset:
        epoch, position = locate(start_step, self.batch_size, lambda: len(self.chunks), True)
        if not self.repeat and epoch:
            raise ValueError(f"start_step {start_step} is past one pass (repeat=False).")

        def generate():
            first = next(self._passes) if not self.repeat and not start_step else epoch
            yield from self._blocks(first, position)

        signature = {
            name: tf.TensorSpec([None, *spec.shape], spec.dtype)
            for name, spec in feature_spec(
                self.config.max_seq_length, self.config.max_predictions_per_seq
            ).items()
        }
        examples = tf.data.Dataset.from_generator(generate, output_signature=signature)
        return batches(examples.unbatch(), self.batch_size)


def dynamic_masking_dataset(source, tokenizer_fn, vocabulary, batch_size: int, **options):
    """Model inputs straight from text with fresh NSP pairs and masks on every pass:
    `MaskingStream(source, tokenizer_fn, vocabulary, batch_size, **options)(0)`.

    Options: `max_seq_length`, `max_predictions_per_seq`, `masked_lm_prob`, `short_seq_prob`,
    `do_whole_word_mask`, `seed` (a reproducible sequence of passes), `repeat`, `input_format`.

    >>> ds = dynamic_masking_dataset("wiki.txt", kbz.BertTokenizer.from_preset(name),
    ...                              "vocab.txt", batch_size=32, seed=1)
    """
    return MaskingStream(source, tokenizer_fn, vocabulary, batch_size, **options)(0)
