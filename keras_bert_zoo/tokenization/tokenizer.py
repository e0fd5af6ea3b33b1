"""BERT WordPiece tokenizer and input packer: Keras layers made of TensorFlow ops.

>>> tok = BertTokenizer.from_preset("bert_base_en_uncased")
>>> tok(["Hello world!"])                      # ragged int32 ids, no special tokens
>>> pre = BertPreprocessor.from_preset("bert_base_en_uncased", sequence_length=128)
>>> pre((questions, passages))                 # token_ids, segment_ids, padding_mask

Ids and offsets equal those of the original BERT tokenization as `tokenizers` implements it
(`BertWordPieceTokenizer(vocabulary, lowercase=L)`) on any text, with no known difference: see
`normalization.py` for how, tests/test_tokenization.py and tools/check_tokenizer_parity.py for
the evidence. Like `tokenizers`, special tokens written in the text ("[MASK]") become their
ids; Google's original code reads them as plain text: `special_tokens_in_strings=False`
(advisable for untrusted text, which could otherwise insert [SEP]).

Both layers run eagerly, in `tf.data` and in exported SavedModels (no `tf.py_function`). Their
graphs hold core TensorFlow ops (UnicodeDecodeWithOffsets, UnicodeEncode, LowerBound,
UpperBound, TopKV2, If, RaggedGather, RaggedRange, RaggedTensorToTensor and basic math, logic
and shape ops) and one tensorflow-text op, FastWordpieceTokenizeWithOffsets (tensorflow-text
>= 2.7, which TF Serving includes); a Python server must `import tensorflow_text` first.

Invalid UTF-8 is read as U+FFFD, which BERT's cleaning drops (like `bytes.decode("utf-8",
"replace")` before `tokenizers`). Empty or blank text gives no tokens, so `[CLS] [SEP]` packed.
"""

import os
import re

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.saving.vocabulary import load_vocabulary
from keras_bert_zoo.tokenization.compiled import compiled_call
from keras_bert_zoo.tokenization.normalization import split_words

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 100  # longer words are [UNK], as in BERT
# tokenizers' WordPiece decoder cleanup, applied to each token in this order.
_CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def _vocabulary_source(vocabulary, tokens):
    name = vocabulary if isinstance(vocabulary, (str, os.PathLike)) else "<list>"
    return f"vocabulary={name} ({len(tokens)} tokens)"


def check_vocabulary_size(tokenizer_or_vocabulary, vocabulary_size):
    """Raises ValueError unless the tokenizer's (or vocabulary's) size is `vocabulary_size`,
    the encoder's embedding rows."""
    if isinstance(tokenizer_or_vocabulary, BertTokenizer):
        size = tokenizer_or_vocabulary.vocabulary_size()
    else:
        size = len(load_vocabulary(tokenizer_or_vocabulary))
    if size != vocabulary_size:
        raise ValueError(
            f"The vocabulary has {size} tokens but the encoder's `vocabulary_size` is "
            f"{vocabulary_size}. Received: vocabulary_size={vocabulary_size}. Use the vocabulary "
            "the encoder was trained with (or build the encoder with vocabulary_size="
            f"{size})."
        )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenizer(keras.layers.Layer):
    """BERT WordPiece tokenizer: text to int32 ids without special tokens.

    Args:
        vocabulary: path of a vocab.txt (one token a line) or a list of tokens. It must hold
            [PAD], [UNK], [CLS], [SEP] and [MASK].
        lowercase: lowercase and strip accents (uncased and Chinese vocabularies); False for
            cased and multilingual ones. Default True, as in `tokenizers` and Google's BERT.
        special_tokens_in_strings: map the five special tokens written literally in the text
            ("[MASK]") to their ids, as `tokenizers` does (default). False reads them as plain
            text, as Google's original BERT code.

    Calling it maps a string to a 1-D tensor of ids, a batch [batch] to a ragged
    [batch, (tokens)], and pre-split words [batch, (words)] (ragged or dense) to
    [batch, (words), (pieces)], which aligns word-level labels (NER) to sub-words.
    """

    def __init__(self, vocabulary, lowercase=True, special_tokens_in_strings=True, **kwargs):
        super().__init__(**kwargs)
        self._convert_input_args = False  # strings stay tf tensors
        self._allow_non_tensor_positional_args = True  # Python strings and lists
        self.built = True
        tokens = load_vocabulary(vocabulary)
        self.vocabulary = tokens
        self.lowercase = bool(lowercase)
        self.special_tokens_in_strings = bool(special_tokens_in_strings)
        self._token_to_id = {token: index for index, token in enumerate(tokens)}  # last wins
        for token in SPECIAL_TOKENS:
            if token not in self._token_to_id:
                raise ValueError(
                    f"`vocabulary` is missing required special token '{token}'. Received: "
                    f"{_vocabulary_source(vocabulary, tokens)}. Use an original BERT vocabulary,"
                    " which holds [PAD], [UNK], [CLS], [SEP], [MASK]."
                )
        (
            self.pad_token_id,
            self.unk_token_id,
            self.cls_token_id,
            self.sep_token_id,
            self.mask_token_id,
        ) = (self._token_to_id[t] for t in SPECIAL_TOKENS)
        # FastWordpiece needs unique, non-empty tokens; entries no word can match keep the ids
        # of duplicates (the last one wins, as in tokenizers) and of empty lines.
        matchable = [
            t if t and self._token_to_id[t] == i and t.strip() == t else f" {i}"
            for i, t in enumerate(tokens)
        ]
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            matchable,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            no_pretokenization=True,
            max_bytes_per_word=4 * MAX_INPUT_CHARS_PER_WORD,
            support_detokenization=False,
        )
        self._special_ids = tf.constant([self._token_to_id[t] for t in SPECIAL_TOKENS])

    @classmethod
    def from_preset(cls, name_or_dir, **kwargs):
        """The tokenizer of a named preset or a preset directory (its vocabulary and casing)."""
        config = load_preset_config(name_or_dir)
        kwargs = {"lowercase": config.lowercase, **kwargs}
        tokenizer = cls(vocabulary=config.vocabulary_path, **kwargs)
        check_vocabulary_size(tokenizer, config.architecture["vocabulary_size"])
        return tokenizer

    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_vocabulary(self):
        return list(self.vocabulary)

    def id_to_token(self, token_id):
        return self.vocabulary[token_id]

    def token_to_id(self, token):
        return self._token_to_id[token]

    def call(self, inputs):
        return self._apply(inputs, offsets=None)[0]

    def tokenize(self, inputs):
        return self(inputs)

    def tokenize_with_offsets(self, inputs, unit="byte"):
        """(ids, starts, ends): each token's span `text[start:end]` in the input string, in
        bytes of its UTF-8 (`unit="byte"`, tf.strings.substr style) or in code points
        (`unit="char"`, Python `str` indices, as SQuAD's answer_start). The spans are those of
        `tokenizers`' offsets; pieces of one character (Hangul jamo) share its span. For
        pre-split words [batch, (words)], spans are into each word."""
        if unit not in ("byte", "char"):
            raise ValueError(f"`unit` must be 'byte' or 'char'. Received: unit={unit!r}")
        return self._apply(inputs, offsets=unit)

    def _apply(self, inputs, offsets):
        if not isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
            inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise ValueError(
                "BertTokenizer expects strings (tf.string). Received: inputs with "
                f"dtype {inputs.dtype.name}."
            )
        rank = inputs.shape.rank

        def tokenize(texts):
            return self._tokenize(texts, offsets)

        if rank == 0:
            return tuple(t[0] for t in compiled_call(self, offsets, tokenize, inputs[None]))
        if rank == 1:
            return compiled_call(self, offsets, tokenize, inputs)
        if rank == 2:  # pre-split words: [batch, (words)] -> [batch, (words), (pieces)]
            if isinstance(inputs, tf.Tensor):
                inputs = tf.RaggedTensor.from_tensor(inputs)
            outputs = compiled_call(self, offsets, tokenize, inputs.values)
            return tuple(inputs.with_values(t) for t in outputs)
        raise ValueError(
            "BertTokenizer expects a string, a batch [batch] of strings or pre-split "
            f"words [batch, (words)]. Received: inputs of shape {inputs.shape}."
        )

    def _tokenize(self, texts, offsets):
        specials = SPECIAL_TOKENS if self.special_tokens_in_strings else ()
        info = split_words(texts, self.lowercase, specials)
        words, chars = info["words"], info["code_points"]
        if offsets:
            ids, begins, ends = self._wordpiece.tokenize_with_offsets(words.values)
        else:
            ids = self._wordpiece.tokenize(words.values)
        # Words longer than 100 characters become [UNK] (FastWordpiece counts bytes, not
        # characters); special tokens matched in the text become their id.
        special = info["special"]
        single = (chars.row_lengths() > MAX_INPUT_CHARS_PER_WORD) | (special >= 0)
        single_id = tf.where(
            special >= 0, tf.gather(self._special_ids, tf.maximum(special, 0)), self.unk_token_id
        )
        # Where each piece and each single word's token lands in the flat output.
        piece_word = ids.value_rowids()
        kept = ~tf.gather(single, piece_word)
        lengths = tf.where(single, tf.constant(1, tf.int64), ids.row_lengths())
        splits = tf.concat([[0], tf.cumsum(lengths)], 0)
        shift = tf.gather(splits[:-1] - ids.row_starts(), piece_word)
        positions = [
            tf.cast(
                tf.boolean_mask(tf.range(tf.size(piece_word, tf.int64)) + shift, kept), tf.int32
            ),
            tf.cast(tf.boolean_mask(splits[:-1], single), tf.int32),
        ]

        def assemble(piece_values, single_values):
            values = tf.dynamic_stitch(
                positions,
                [tf.boolean_mask(piece_values, kept), tf.boolean_mask(single_values, single)],
            )
            return tf.RaggedTensor.from_row_splits(
                values, tf.gather(splits, words.row_splits), validate=False
            )

        if not offsets:
            return (assemble(ids.values, single_id),)
        # Map each piece's byte span inside its word to the first and last character it covers.
        code_points = chars.values
        utf8_lengths = 1 + tf.add_n(
            [tf.cast(code_points >= b, tf.int64) for b in (0x80, 0x800, 0x10000)]
        )
        char_bytes = tf.cumsum(utf8_lengths, exclusive=True)
        base = tf.gather(tf.gather(char_bytes, chars.row_starts()), piece_word)
        first = tf.searchsorted(char_bytes, base + tf.cast(begins.values, tf.int64))
        last = tf.searchsorted(char_bytes, base + tf.cast(ends.values, tf.int64)) - 1
        prefix = "" if offsets == "byte" else "char_"
        outputs = [assemble(ids.values, single_id)]
        for key, index, word_index in (
            ("start", first, chars.row_starts()),
            ("end", last, chars.row_limits() - 1),
        ):
            values = info[prefix + key].values
            outputs.append(assemble(tf.gather(values, index), tf.gather(values, word_index)))
        return tuple(outputs)

    def detokenize(self, ids, skip_special_tokens=True):
        """Ids [tokens] or [batch, (tokens)] (ragged or dense, e.g. packed `token_ids`) back to
        text, as `tokenizers`' `decode`: "##" pieces glued to the previous token, other tokens
        space-separated, its punctuation cleanup, and special tokens (with [UNK]) skipped."""
        ids = ids if isinstance(ids, tf.RaggedTensor) else tf.convert_to_tensor(ids)
        rank = ids.shape.rank
        if rank == 1:
            return self.detokenize(ids[None], skip_special_tokens)[0]
        if rank != 2:
            raise ValueError(f"`ids` must have rank 1 or 2. Received: ids of shape {ids.shape}.")
        key = ("detokenize", skip_special_tokens, isinstance(ids, tf.Tensor))
        return compiled_call(self, key, lambda x: self._detokenize(x, skip_special_tokens), ids)

    def _detokenize(self, ids, skip_special_tokens):
        if isinstance(ids, tf.Tensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int32)
        if skip_special_tokens:
            special = tf.reduce_any(ids.values[:, None] == self._special_ids[None, :], axis=1)
            ids = tf.ragged.boolean_mask(ids, ids.with_values(~special))
        tokens = tf.gather(tf.constant(self.vocabulary), ids.values)
        first = tf.range(tf.size(tokens, tf.int64)) == tf.gather(
            ids.row_starts(), ids.value_rowids()
        )
        suffix = tf.strings.regex_full_match(tokens, "##.*") & ~first
        tokens = tf.where(
            suffix,
            tf.strings.regex_replace(tokens, "^##", ""),
            tf.where(first, tokens, tf.strings.join([" ", tokens])),
        )
        for old, new in _CLEANUP:
            tokens = tf.strings.regex_replace(tokens, re.escape(old), new)
        return tf.strings.reduce_join(ids.with_values(tokens), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": self.get_vocabulary(),
                "lowercase": self.lowercase,
                "special_tokens_in_strings": self.special_tokens_in_strings,
            }
        )
        return config
