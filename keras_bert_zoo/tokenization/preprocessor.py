"""`BertPreprocessor`: strings to the encoder's `token_ids`, `segment_ids`, `padding_mask`.

Tokenizes one or two segments with a `BertTokenizer` and packs them as BERT did:
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated like google-research/bert's
`truncate_seq_pair`, right-padded to a fixed length. The packer is written with core
TensorFlow ops rather than tf-text's `RoundRobinTrimmer`, whose op stock TF Serving cannot
load, so exported string signatures serve anywhere.

>>> pre = BertPreprocessor.from_preset("bert_base_en_uncased", sequence_length=128)
>>> pre((questions, passages))                 # token_ids, segment_ids, padding_mask
"""

import keras
import tensorflow as tf

from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.tokenization.compiled import compiled_call
from keras_bert_zoo.tokenization.tokenizer import BertTokenizer


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs one or two segments: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`.

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: the fixed output length.

    Call it on strings [batch] or a string (unbatched), or on a pair as a tuple
    `(first, second)` (or two arguments, as `tf.data` passes tuple elements). Returns a dict of
    int32 `token_ids`, `segment_ids` and `padding_mask`, each [batch, sequence_length] (or
    [sequence_length]). Too long inputs are truncated like BERT's `truncate_seq_pair`: a token
    is removed from the end of the longer segment (the second on ties) until they fit.
    Padding is `[PAD]` with segment 0 and mask 0.
    """

    def __init__(self, tokenizer, sequence_length=512, **kwargs):
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(
                f"`tokenizer` must be a BertTokenizer. Received: tokenizer of type "
                f"{type(tokenizer).__name__}."
            )
        if not isinstance(sequence_length, int) or sequence_length < 2:
            raise ValueError(
                "`sequence_length` must be an integer >= 2 ([CLS] and [SEP]). "
                f"Received: sequence_length={sequence_length!r}."
            )
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length

    @classmethod
    def from_preset(cls, name_or_dir, sequence_length=None, **kwargs):
        """The preprocessor of a named preset or preset directory; `sequence_length` must not
        exceed the encoder's `max_sequence_length`. None (the default) takes the length the
        preset records (the run's `--sequence-length`, a sentence-transformers model's
        `max_seq_length`), else 512."""
        config = load_preset_config(name_or_dir)
        maximum = config.architecture["max_sequence_length"]
        sequence_length = sequence_length or config.sequence_length or 512
        if sequence_length > maximum:
            raise ValueError(
                f"`sequence_length` must be at most the preset's max_sequence_length"
                f" {maximum}. Received: sequence_length={sequence_length}."
            )
        return cls(BertTokenizer.from_preset(name_or_dir), sequence_length, **kwargs)

    def call(self, inputs, second=None):
        segments = inputs if isinstance(inputs, tuple) else (inputs,)  # a list is a batch
        segments += () if second is None else (second,)
        if len(segments) not in (1, 2) or (len(segments) == 2 and self.sequence_length < 3):
            raise ValueError(
                "BertPreprocessor packs one segment, or two with "
                "sequence_length >= 3. Received: "
                f"{len(segments)} segments, sequence_length={self.sequence_length}."
            )
        segments = [s if isinstance(s, tf.Tensor) else tf.convert_to_tensor(s) for s in segments]
        if any(s.dtype != tf.string for s in segments):
            raise ValueError(
                "BertPreprocessor expects strings (tf.string). Received: dtypes "
                f"{[s.dtype.name for s in segments]}."
            )
        ranks = {s.shape.rank for s in segments}
        sizes = {s.shape[0] for s in segments if s.shape.rank == 1 and s.shape[0] is not None}
        if ranks not in ({0}, {1}) or len(sizes) > 1:
            raise ValueError(
                "Segments must all be strings (rank 0) or all batches (rank 1) of "
                f"one size. Received: shapes {[s.shape for s in segments]}."
            )
        if ranks == {0}:
            outputs = self.call(tuple(s[None] for s in segments))
            return {key: value[0] for key, value in outputs.items()}
        return compiled_call(self, len(segments), self._pack, *segments)

    def _pack(self, *segments):
        count, length = len(segments), self.sequence_length
        ids = self.tokenizer(tf.concat(segments, 0))  # one tokenizer graph for both segments
        values = tf.concat([ids.values, [0]], 0)  # never empty
        starts = tf.reshape(tf.cast(ids.row_starts(), tf.int32), [count, -1])
        lengths = tf.reshape(tf.cast(ids.row_lengths(), tf.int32), [count, -1])
        # BERT's truncate_seq_pair (pop from the longer segment, the second on ties) in closed
        # form. Written by hand: keras-hub's MultiSegmentPacker and tf_text's RoundRobinTrimmer
        # keep the same tokens but run the TFText>RoundRobinTrim op (tensorflow-text >= 2.16),
        # which stock TF Serving (built with tensorflow-text 2.12) cannot load.
        budget = length - 1 - count
        if count == 1:
            keep = [tf.minimum(lengths[0], budget)]
        else:
            second = tf.minimum(lengths[1], tf.maximum(budget - lengths[0], budget // 2))
            keep = [tf.minimum(lengths[0], budget - second), second]
        # Fill [batch, sequence_length] by position: [CLS] A [SEP] (B [SEP]) [PAD]...
        position = tf.range(length)[None, :]
        token_ids = tf.where(
            position == 0, self.tokenizer.cls_token_id, self.tokenizer.pad_token_id
        )
        segment_ids = tf.zeros_like(position)
        begin = tf.ones_like(keep[0])[:, None]  # where the segment's first token goes
        for index in range(count):
            end = begin + keep[index][:, None]
            inside = (position >= begin) & (position < end)
            source = tf.clip_by_value(
                starts[index][:, None] + position - begin, 0, tf.size(values) - 1
            )
            token_ids = tf.where(inside, tf.gather(values, source), token_ids)
            token_ids = tf.where(position == end, self.tokenizer.sep_token_id, token_ids)
            segment_ids += tf.cast((position >= begin) & (position <= end), tf.int32) * index
            begin = end + 1
        return {
            "token_ids": token_ids,
            "segment_ids": segment_ids,
            "padding_mask": tf.cast(position < begin, tf.int32),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "sequence_length": self.sequence_length,
            }
        )
        return config
