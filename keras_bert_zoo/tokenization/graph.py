"""The tokenizer as TensorFlow ops: what `BertTokenizer` runs in tf.data, tf.function and
SavedModels (and on every input when Keras runs on TensorFlow).

Core TensorFlow ops (UnicodeDecodeWithOffsets, UnicodeEncode, LowerBound, UpperBound, TopKV2,
If, RaggedGather, RaggedRange, RaggedTensorToTensor and basic math, logic and shape ops) and
one tensorflow-text op, FastWordpieceTokenizeWithOffsets (tensorflow-text >= 2.7, which TF
Serving includes); a Python server must `import tensorflow_text` first. No `py_function`.
"""

import re

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.tokenization.compiled import compiled_call
from keras_bert_zoo.tokenization.host import CLEANUP, MAX_INPUT_CHARS_PER_WORD
from keras_bert_zoo.tokenization.normalization import split_words


class GraphWordPiece:
    """WordPiece of `BertTokenizer` in TensorFlow ops: ragged int32 ids and int64 offsets."""

    def __init__(self, layer):
        self.layer = layer
        self.unk_token_id = layer.unk_token_id
        # FastWordpiece needs unique, non-empty tokens; entries no word can match keep the ids
        # of duplicates (the last one wins, as in tokenizers) and of empty lines.
        matchable = [
            t if t and layer._token_to_id[t] == i and t.strip() == t else f" {i}"
            for i, t in enumerate(layer.vocabulary)
        ]
        with tf.init_scope():  # first use may be inside a trace (tf.data); the model outlives it
            self._wordpiece = tf_text.FastWordpieceTokenizer(
                matchable,
                token_out_type=tf.int32,
                unknown_token="[UNK]",
                no_pretokenization=True,
                max_bytes_per_word=4 * MAX_INPUT_CHARS_PER_WORD,
                support_detokenization=False,
            )
            self._special_ids = tf.constant(layer.special_token_ids())

    def apply(self, inputs, offsets):
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

    @tf.autograph.experimental.do_not_convert  # no tensor-dependent Python (compiled.py)
    def _tokenize(self, texts, offsets):
        info = split_words(texts, self.layer.lowercase, self.layer.specials_in_text())
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

    def detokenize(self, ids, skip_special_tokens):
        ids = ids if isinstance(ids, tf.RaggedTensor) else tf.convert_to_tensor(ids)
        rank = ids.shape.rank
        if rank == 1:
            return self.detokenize(ids[None], skip_special_tokens)[0]
        if rank != 2:
            raise ValueError(f"`ids` must have rank 1 or 2. Received: ids of shape {ids.shape}.")
        key = ("detokenize", skip_special_tokens, isinstance(ids, tf.Tensor))
        return compiled_call(self, key, lambda x: self._detokenize(x, skip_special_tokens), ids)

    @tf.autograph.experimental.do_not_convert
    def _detokenize(self, ids, skip_special_tokens):
        if isinstance(ids, tf.Tensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int32)
        if skip_special_tokens:
            special = tf.reduce_any(ids.values[:, None] == self._special_ids[None, :], axis=1)
            ids = tf.ragged.boolean_mask(ids, ids.with_values(~special))
        tokens = tf.gather(tf.constant(self.layer.vocabulary), ids.values)
        first = tf.range(tf.size(tokens, tf.int64)) == tf.gather(
            ids.row_starts(), ids.value_rowids()
        )
        suffix = tf.strings.regex_full_match(tokens, "##.*") & ~first
        tokens = tf.where(
            suffix,
            tf.strings.regex_replace(tokens, "^##", ""),
            tf.where(first, tokens, tf.strings.join([" ", tokens])),
        )
        for old, new in CLEANUP:
            tokens = tf.strings.regex_replace(tokens, re.escape(old), new)
        return tf.strings.reduce_join(ids.with_values(tokens), axis=-1)


def pack_segments(preprocessor, segments):
    """`BertPreprocessor` in TensorFlow ops: one or two string segments, each a string or a
    batch [batch], to `token_ids`, `segment_ids`, `padding_mask`."""
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
        outputs = pack_segments(preprocessor, [s[None] for s in segments])
        return {key: value[0] for key, value in outputs.items()}
    return compiled_call(preprocessor, len(segments), lambda *s: _pack(preprocessor, *s), *segments)


@tf.autograph.experimental.do_not_convert
def _pack(preprocessor, *segments):
    tokenizer = preprocessor.tokenizer
    count, length = len(segments), preprocessor.sequence_length
    ids = tokenizer(tf.concat(segments, 0))  # one tokenizer graph for both segments
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
    token_ids = tf.where(position == 0, tokenizer.cls_token_id, tokenizer.pad_token_id)
    segment_ids = tf.zeros_like(position)
    begin = tf.ones_like(keep[0])[:, None]  # where the segment's first token goes
    for index in range(count):
        end = begin + keep[index][:, None]
        inside = (position >= begin) & (position < end)
        source = tf.clip_by_value(starts[index][:, None] + position - begin, 0, tf.size(values) - 1)
        token_ids = tf.where(inside, tf.gather(values, source), token_ids)
        token_ids = tf.where(position == end, tokenizer.sep_token_id, token_ids)
        segment_ids += tf.cast((position >= begin) & (position <= end), tf.int32) * index
        begin = end + 1
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": tf.cast(position < begin, tf.int32),
    }
