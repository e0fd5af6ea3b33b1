"""Texts to numpy on any backend: what the `kbz` jobs tokenize, whichever path runs.

The jobs hand `BertTokenizer` and `BertPreprocessor` Python lists of strings; `uses_graph`
then picks the TensorFlow graph on the TensorFlow backend (as the jobs always did) and
`tokenizers` + numpy elsewhere or without TensorFlow, and these helpers read either result
back as numpy (graph: ragged or dense tensors; host: arrays and lists of arrays). Both paths
give the same ids and offsets (tests/test_numpy_pipelines.py on the bundled samples).

>>> token_lists(preprocessor.tokenizer, ["a sentence", "another"])   # [[1037, 6251], [2178]]
>>> packed_arrays(preprocessor, questions, passages)["token_ids"]      # int32 [batch, length]
"""

import numpy as np


def _rows(values):
    """A tensor's rows (ragged: an object array of 1-D arrays) or the host's list of arrays."""
    return values.numpy() if hasattr(values, "numpy") else values


def token_lists(tokenizer, texts, offsets: bool = False, batch: int = 4096) -> list:
    """Tokenizes `texts` in chunks of `batch`: a list of id lists, or with `offsets` of
    `(id, start, end)` triples in characters (Python `str` indices)."""
    results = []
    for begin in range(0, len(texts), batch):
        chunk = list(texts[begin : begin + batch])
        if not offsets:
            results += [np.asarray(row).tolist() for row in _rows(tokenizer(chunk))]
            continue
        ids, starts, ends = (_rows(v) for v in tokenizer.tokenize_with_offsets(chunk, unit="char"))
        for i, s, e in zip(ids, starts, ends, strict=True):
            rows = (np.asarray(v).tolist() for v in (i, s, e))
            results.append(list(zip(*rows, strict=True)))
    return results


def packed_arrays(preprocessor, first, second=None) -> dict:
    """`preprocessor` on one segment of texts (or two, `second`): numpy `token_ids`,
    `segment_ids`, `padding_mask` [batch, sequence_length]."""
    segments = [list(first)]
    if second is not None:
        segments.append(list(second))
    inputs = preprocessor(tuple(segments) if len(segments) == 2 else segments[0])
    return {key: np.asarray(value) for key, value in inputs.items()}
