"""`BertPreprocessor`: strings to the encoder's `token_ids`, `segment_ids`, `padding_mask`.

Tokenizes one or two segments with a `BertTokenizer` and packs them as BERT did:
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated like google-research/bert's
`truncate_seq_pair`, right-padded to a fixed length. Like the tokenizer it runs as TensorFlow
ops (`graph.pack_segments`: core ops rather than tf-text's `RoundRobinTrimmer`, whose op stock
TF Serving cannot load) or, off TensorFlow, in numpy (`host.pack`): same ids, int32 arrays.

>>> pre = BertPreprocessor.from_preset("bert_base_en_uncased", sequence_length=128)
>>> pre((questions, passages))                 # token_ids, segment_ids, padding_mask
"""

import keras
import numpy as np

from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.tokenization import host
from keras_bert_zoo.tokenization import tokenizer as wordpiece
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
        if wordpiece.uses_graph(*segments):  # one switch for the tokenizer and the packer
            return wordpiece.graph_ops().pack_segments(self, segments)
        return self._pack_on_host(segments)

    def _pack_on_host(self, segments):
        single = [isinstance(s, (str, bytes)) or np.ndim(s) == 0 for s in segments]
        if any(single) and not all(single):
            raise ValueError(
                "Segments must all be strings (rank 0) or all batches (rank 1) of one size. "
                f"Received: types {[type(s).__name__ for s in segments]}."
            )
        if all(single):
            outputs = self._pack_on_host([[s] for s in segments])
            return {key: value[0] for key, value in outputs.items()}
        ids = [self.tokenizer(list(s)) for s in segments]
        if len({len(i) for i in ids}) > 1:
            raise ValueError(
                "Segments must all be batches of one size. Received: sizes "
                f"{[len(i) for i in ids]}."
            )
        t = self.tokenizer
        return host.pack(ids, self.sequence_length, t.cls_token_id, t.sep_token_id, t.pad_token_id)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "sequence_length": self.sequence_length,
            }
        )
        return config
