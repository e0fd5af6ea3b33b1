"""BERT text normalization and pre-tokenization as TensorFlow ops, on Unicode code points.

Reproduces `tokenizers`' BertNormalizer(clean_text=True, handle_chinese_chars=True,
strip_accents=None, lowercase=L) followed by BertPreTokenizer, character for character, offsets
included. Every step but one acts on one character at a time: drop controls, map whitespace to
a space, space out CJK ideographs, decompose (NFD), drop non-spacing marks, lowercase (per
character: no final sigma). Those are per-code-point tables recorded from `tokenizers` itself
(`_unicode_tables.py`), because `tokenizers` mixes Unicode versions (its control, punctuation
and mark tables predate Unicode 9, its lowercasing is recent) that no ICU, RE2 or Python
version reproduces; keras-hub's and tf_text's case folding and NFKC differ further. The one
step across characters, NFD's canonical reordering of combining marks, is a stable sort by
combining class, done when a text needs it.
"""

import functools
import re

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tokenization import _unicode_tables

KEEP, DROP, SPACE, CJK, HANGUL, MULTI = range(6)
OTHER, WHITESPACE, PUNCTUATION = range(3)
_NORMALIZER_KINDS = {"k": KEEP, "d": DROP, "s": SPACE, "c": CJK, "h": HANGUL, "m": MULTI}
_PRE_TOKENIZER_KINDS = {"o": OTHER, "w": WHITESPACE, "p": PUNCTUATION}
# Matches of special tokens in the text become one private-use code point each (the normalizer
# drops every private-use character of the input, so these cannot collide with text).
SENTINEL = 0xE000


@functools.cache
def _runs(name):
    """(starts, kinds, deltas) int32 arrays of one table in `_unicode_tables`."""
    kinds_map = _PRE_TOKENIZER_KINDS if name == "PRETOKENIZER" else _NORMALIZER_KINDS
    runs = re.findall(r"([0-9A-F]+)([a-z])(-?\d*)", getattr(_unicode_tables, name))
    starts = np.array([int(start, 16) for start, _, _ in runs], np.int32)
    kinds = np.array([kinds_map[kind] for _, kind, _ in runs], np.int32)
    deltas = np.array([int(delta or 0) for _, _, delta in runs], np.int32)
    return starts, kinds, deltas


@functools.cache
def _multi():
    """(keys [M], outputs [M, 4], lengths [M]) of characters that decompose to several."""
    entries = [e.split(":") for e in _unicode_tables.UNCASED_MULTI.split()]
    keys = np.array([int(key, 16) for key, _ in entries], np.int32)
    outputs = np.zeros([len(entries), 4], np.int32)
    lengths = np.zeros([len(entries)], np.int32)
    for row, (_, values) in enumerate(entries):
        values = [int(v, 16) for v in values.split(",")]
        outputs[row, : len(values)], lengths[row] = values, len(values)
    return keys, outputs, lengths


def _lookup(name, code_points):
    starts, kinds, deltas = _runs(name)
    run = tf.searchsorted(starts, code_points, side="right") - 1
    return tf.gather(kinds, run), tf.gather(deltas, run)


def normalize(code_points, row_ids, lowercase, overrides=None):
    """Normalizes int32 code points [N] (of rows `row_ids`) to (normalized [M], index of the
    input character each one is aligned to [M], None or a mask [M] of the characters to keep).

    `overrides` ([N], -1 where unused) forces a character to one sentinel code point
    (SENTINEL + override), or drops it where -2; used for special tokens matched in the text.
    """
    kind, delta = _lookup("UNCASED_DECOMPOSE" if lowercase else "CASED", code_points)
    mapped = code_points + delta
    if overrides is not None:
        kind = tf.where(overrides == -2, DROP, tf.where(overrides >= 0, KEEP, kind))
        mapped = tf.where(overrides >= 0, SENTINEL + overrides, mapped)
    spaced = (kind == SPACE) | (kind == CJK)
    columns = [
        tf.where(spaced, 32, mapped),
        tf.where(kind == CJK, mapped, 0),
        tf.where(kind == CJK, 32, 0),
        tf.zeros_like(mapped),
    ]
    length = tf.gather(tf.constant([1, 0, 1, 3, 0, 0]), kind)
    if lowercase:  # Hangul syllables (NFD, computed) and the other multi-character outputs.
        syllable = code_points - 0xAC00
        hangul = kind == HANGUL
        jamo = [0x1100 + syllable // 588, 0x1161 + syllable % 588 // 28, 0x11A7 + syllable % 28]
        length = tf.where(hangul, 2 + tf.cast(syllable % 28 > 0, tf.int32), length)
        keys, outputs, lengths = _multi()
        row = tf.minimum(tf.searchsorted(keys, code_points), len(keys) - 1)
        multi = kind == MULTI
        length = tf.where(multi, tf.gather(lengths, row), length)
        outputs = tf.gather(outputs, row)
        columns = [
            tf.where(
                multi, outputs[:, i], tf.where(hangul, jamo[i], columns[i]) if i < 3 else columns[i]
            )
            for i in range(4)
        ]
    index = tf.where(tf.reshape(tf.sequence_mask(length, 4), [-1]))[:, 0]
    chars, source = tf.gather(tf.reshape(tf.stack(columns, 1), [-1]), index), index // 4
    kept = None
    if lowercase:  # NFD reordering, then (in split_words) drop non-spacing marks; lowercase.
        # NFD output characters that stand for a character of their input (the rest are
        # inserted by a decomposition); CJK spacing gave 3 such characters.
        consuming = tf.gather(
            tf.reshape(tf.stack([kind >= 0, kind == CJK, kind == CJK, kind < 0], 1), [-1]), index
        )
        chars, source = _canonical_order(chars, source, consuming, tf.gather(row_ids, source))
        kind, delta = _lookup("UNCASED_FINISH", chars)
        chars, kept = chars + delta, kind != DROP
    return chars, source, kept


def _canonical_order(chars, source, consuming, rows):
    """NFD's canonical ordering: a stable sort of each run of marks by combining class.

    Alignments are then re-assigned as `tokenizers` does: in order, each character that stood
    for an input character takes the next input character's alignment, an inserted one the
    previous alignment.
    """
    _, key = _lookup("COMBINING_CLASSES", chars)
    same_row = rows == tf.concat([[tf.constant(-1, rows.dtype)], rows], 0)[:-1]
    previous_key = tf.concat([[0], key], 0)[:-1]
    disordered = tf.reduce_any(same_row & (previous_key > key) & (key > 0))

    def reorder():
        run = tf.cumsum(tf.cast((key == 0) | ~same_row, tf.int64))
        order = tf.argsort(run * 512 + tf.cast(key, tf.int64), stable=True)
        taken = tf.cumsum(tf.cast(tf.gather(consuming, order), tf.int64)) - 1
        return tf.gather(chars, order), tf.gather(tf.boolean_mask(source, consuming), taken)

    return tf.cond(disordered, reorder, lambda: (chars, source))


def _match_special_tokens(code_points, row_ids, special_tokens):
    """Literal (case-sensitive) matches of `special_tokens` in the text, as `normalize`
    overrides, and the length of each match (0 where none starts). BERT's special tokens
    ("[CLS]"...) cannot overlap, so every match counts."""
    size = tf.size(code_points)
    longest = max(len(token) for token in special_tokens)
    table = np.full([len(special_tokens), longest], -2, np.int32)  # -2: past the token's end
    for row, token in enumerate(special_tokens):
        table[row, : len(token)] = [ord(char) for char in token]
    position = tf.range(size)
    first = tf.reduce_any(code_points[:, None] == np.unique(table[:, 0]), axis=1)
    candidates = tf.boolean_mask(position, first)  # few: where a special token could start
    window = candidates[:, None] + tf.range(longest)
    padded = tf.concat([code_points, tf.fill([longest], -1)], 0)
    padded_rows = tf.concat([row_ids, tf.fill([longest], tf.constant(-1, row_ids.dtype))], 0)
    windows = tf.where(
        tf.gather(padded_rows, window) == tf.gather(row_ids, candidates)[:, None],
        tf.gather(padded, window),
        -1,
    )
    hits = tf.reduce_all((windows[:, None, :] == table) | (table == -2), axis=2)
    matched = tf.reduce_any(hits, axis=1)
    starts = tf.boolean_mask(candidates, matched)  # sorted
    tokens = tf.boolean_mask(tf.argmax(tf.cast(hits, tf.int32), 1, output_type=tf.int32), matched)
    ends = starts + tf.gather([len(token) for token in special_tokens], tokens)
    # Each character against the last match starting at or before it.
    last = tf.searchsorted(starts, position, side="right") - 1
    last = tf.where(last >= 0, last, tf.size(starts))  # none: the -1 appended below
    begin, end, token = (tf.gather(tf.concat([t, [-1]], 0), last) for t in (starts, ends, tokens))
    at_start, covered = position == begin, (position > begin) & (position < end)
    overrides = tf.where(at_start, token, tf.where(covered, -2, -1))
    return overrides, tf.cast(tf.where(at_start, end - begin, 0), tf.int64)


def split_words(texts, lowercase, special_tokens=()):
    """Normalizes and pre-tokenizes a 1-D batch of UTF-8 strings.

    Returns a dict: `words` [batch, (words)] normalized words (tf.string); `code_points`
    [words, (chars)] their code points; `start`/`end` [words, (chars)] each character's span in
    the input, in bytes, and `char_start`/`char_end` in code points; `special` [words] the index
    in `special_tokens` of a word that is a special token, else -1. Invalid UTF-8 decodes to
    U+FFFD, which the normalizer drops.
    """
    code_points, starts = tf.strings.unicode_decode_with_offsets(
        texts, "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    row_ids = code_points.value_rowids()
    chars, starts = code_points.values, starts.values
    char_starts = tf.range(tf.size(chars, tf.int64)) - tf.gather(code_points.row_starts(), row_ids)
    lengths = 1 + tf.add_n([tf.cast(chars >= b, tf.int64) for b in (0x80, 0x800, 0x10000)])
    char_lengths = tf.ones_like(lengths)
    overrides = None
    if special_tokens:
        overrides, match_lengths = _match_special_tokens(chars, row_ids, special_tokens)
        lengths = tf.where(overrides >= 0, match_lengths, lengths)
        char_lengths = tf.where(overrides >= 0, match_lengths, char_lengths)
    normalized, source, normalized_kept = normalize(chars, row_ids, lowercase, overrides)
    if normalized_kept is not None:
        normalized, source = (
            tf.gather(t, tf.where(normalized_kept)[:, 0]) for t in (normalized, source)
        )
    rows = tf.gather(row_ids, source)
    kind, _ = _lookup("PRETOKENIZER", normalized)
    if special_tokens:
        sentinel = (normalized >= SENTINEL) & (normalized < SENTINEL + len(special_tokens))
        kind = tf.where(sentinel, PUNCTUATION, kind)
    # A word starts at a kept character that is punctuation or follows a non-"other" character
    # or a row boundary; whitespace is dropped.
    kept = kind != WHITESPACE
    previous_kind = tf.concat([[WHITESPACE], kind], 0)[:-1]
    previous_row = tf.concat([[tf.constant(-1, rows.dtype)], rows], 0)[:-1]
    begins = (kind == PUNCTUATION) | (previous_kind != OTHER) | (previous_row != rows)
    index = tf.where(kept)[:, 0]
    normalized, source, begins = (tf.gather(t, index) for t in (normalized, source, begins))
    word_ids = tf.cumsum(tf.cast(begins, tf.int64)) - 1
    num_words = tf.reduce_sum(tf.cast(begins, tf.int64))
    word_chars = tf.RaggedTensor.from_value_rowids(normalized, word_ids, num_words, validate=False)
    words = tf.strings.unicode_encode(word_chars, "UTF-8")
    word_rows = tf.boolean_mask(tf.gather(row_ids, source), begins)

    def per_char(values):
        return word_chars.with_values(tf.gather(values, source))

    special = tf.fill([num_words], -1)
    if special_tokens:
        first = tf.gather(word_chars.values, word_chars.row_starts())
        is_special = (first >= SENTINEL) & (first < SENTINEL + len(special_tokens))
        special = tf.where(is_special, first - SENTINEL, -1)
    return {
        "words": tf.RaggedTensor.from_value_rowids(
            words, word_rows, tf.size(texts, tf.int64), validate=False
        ),
        "code_points": word_chars,
        "start": per_char(starts),
        "end": per_char(starts + lengths),
        "char_start": per_char(char_starts),
        "char_end": per_char(char_starts + char_lengths),
        "special": special,
    }
