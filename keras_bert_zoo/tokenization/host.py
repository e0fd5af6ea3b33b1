"""The tokenizer and packer on the host, without TensorFlow: Hugging Face `tokenizers` + numpy.

What `BertTokenizer` and `BertPreprocessor` run off TensorFlow (JAX and PyTorch backends, or
TensorFlow not installed) on Python strings, bytes and numpy arrays. The ids and offsets are
`tokenizers`' `BertWordPieceTokenizer` pipeline (BERT normalizer and pre-tokenizer, WordPiece
with 100-character words), which the TensorFlow graph equals on every corpus we have
(tests/test_tokenization.py runs both); `pack` is the graph's `truncate_seq_pair` packing in
numpy. Invalid UTF-8 is read as U+FFFD, as the graph does; byte offsets then address the
repaired text.
"""

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

MAX_INPUT_CHARS_PER_WORD = 100  # longer words are [UNK], as in BERT
# tokenizers' WordPiece decoder cleanup, applied to each token in this order.
CLEANUP = (
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


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _rank(inputs) -> int:
    if isinstance(inputs, (str, bytes)) or (isinstance(inputs, np.ndarray) and inputs.ndim == 0):
        return 0
    if isinstance(inputs, np.ndarray) and inputs.dtype.kind not in "OUS":
        raise ValueError(
            f"BertTokenizer expects strings. Received: inputs with dtype {inputs.dtype}."
        )
    rows = list(inputs)
    if all(isinstance(row, (str, bytes, np.str_, np.bytes_)) for row in rows):
        return 1
    if all(not isinstance(row, (str, bytes)) and _rank(row) == 1 for row in rows):
        return 2
    raise ValueError(
        "BertTokenizer expects a string, a batch [batch] of strings or pre-split words "
        f"[batch, (words)]. Received: inputs of type {type(inputs).__name__}."
    )


class HostWordPiece:
    """WordPiece of `BertTokenizer` through `tokenizers`: int32 numpy ids, int64 offsets.

    A string gives a 1-D array; a batch a list of 1-D arrays; pre-split words a list (batch) of
    lists (words) of 1-D arrays, as the graph's ragged tensors read with `to_list()`.
    """

    def __init__(self, layer):
        self.layer = layer
        tokenizer = Tokenizer(
            models.WordPiece(
                dict(layer._token_to_id),
                unk_token="[UNK]",
                max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
            )
        )
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, lowercase=layer.lowercase
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece(prefix="##")
        tokenizer.add_special_tokens(list(layer.specials_in_text()))
        self._tokenizer = tokenizer
        self._special_ids = set(layer.special_token_ids())

    def apply(self, inputs, offsets):
        rank = _rank(inputs)
        if rank == 0:
            return tuple(t[0] for t in self._batch([_text(inputs)], offsets))
        if rank == 1:
            return self._batch([_text(t) for t in inputs], offsets)
        words = [[_text(w) for w in sentence] for sentence in inputs]
        outputs = self._batch([w for sentence in words for w in sentence], offsets)
        splits = np.cumsum([0] + [len(sentence) for sentence in words])
        return tuple(
            [rows[a:b] for a, b in zip(splits[:-1], splits[1:], strict=True)] for rows in outputs
        )

    def _batch(self, texts, offsets):
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        ids = [np.asarray(e.ids, np.int32) for e in encodings]
        if not offsets:
            return (ids,)
        spans = [np.asarray(e.offsets, np.int64).reshape(-1, 2) for e in encodings]
        if offsets == "byte":  # character offsets to UTF-8 byte offsets
            for text, span in zip(texts, spans, strict=True):
                sizes = [len(c.encode("utf-8", "surrogatepass")) for c in text]
                span[:] = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])[span]
        return ids, [s[:, 0] for s in spans], [s[:, 1] for s in spans]

    def detokenize(self, ids, skip_special_tokens):
        rows = [np.asarray(row).tolist() for row in ids]
        if rows and not isinstance(rows[0], list):  # one row of ids
            return self.detokenize([rows], skip_special_tokens)[0]
        if skip_special_tokens:
            rows = [[i for i in row if i not in self._special_ids] for row in rows]
        # Our special tokens are skipped above, so tokenizers' own skip stays off.
        return self._tokenizer.decode_batch(rows, skip_special_tokens=False)


def pack(ids, sequence_length, cls_id, sep_id, pad_id):
    """One or two segments of ids (lists of 1-D arrays, one per row) to `token_ids`,
    `segment_ids`, `padding_mask` [batch, sequence_length], truncated as BERT's
    `truncate_seq_pair` (the graph's closed form: pop from the longer, the second on ties)."""
    count, batch = len(ids), len(ids[0])
    token_ids = np.full((batch, sequence_length), pad_id, np.int32)
    segment_ids = np.zeros((batch, sequence_length), np.int32)
    padding_mask = np.zeros((batch, sequence_length), np.int32)
    budget = sequence_length - 1 - count
    for row in range(batch):
        lengths = [len(segment[row]) for segment in ids]
        if count == 1:
            keep = [min(lengths[0], budget)]
        else:
            second = min(lengths[1], max(budget - lengths[0], budget // 2))
            keep = [min(lengths[0], budget - second), second]
        pieces = [[cls_id]]
        for index in range(count):
            pieces += [ids[index][row][: keep[index]], [sep_id]]
        values = np.concatenate(pieces)
        token_ids[row, : len(values)] = values
        padding_mask[row, : len(values)] = 1
        if count == 2:
            segment_ids[row, keep[0] + 2 : len(values)] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
