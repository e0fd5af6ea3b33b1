"""Texts to numpy on any backend: what the `kbz` jobs tokenize, whichever path runs.

The jobs hand `BertTokenizer` and `BertPreprocessor` Python lists of strings, which these
helpers tokenize with `tokenizers` + numpy on every backend (`tokenizer.on_host`: on TensorFlow
the graph's first call spends longer tracing than the host takes for a corpus;
benchmarks/RESULTS.md, "Command-line start-up"), and read the result back as numpy; a caller's
TensorFlow tensors still go to the
graph (ragged or dense tensors, read back the same way). Both paths give the same ids and
offsets (tests/test_numpy_pipelines.py on the bundled samples, tests/test_tokenization.py).

>>> token_lists(preprocessor.tokenizer, ["a sentence", "another"])   # [[1037, 6251], [2178]]
>>> packed_arrays(preprocessor, questions, passages)["token_ids"]      # int32 [batch, length]
"""

import numpy as np

from keras_bert_zoo.tokenization.tokenizer import on_host


def _rows(values):
    """A tensor's rows (ragged: an object array of 1-D arrays) or the host's list of arrays."""
    return values.numpy() if hasattr(values, "numpy") else values


@on_host()
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


@on_host()
def packed_arrays(preprocessor, first, second=None) -> dict:
    """`preprocessor` on one segment of texts (or two, `second`): numpy `token_ids`,
    `segment_ids`, `padding_mask` [batch, sequence_length]."""
    segments = [list(first)]
    if second is not None:
        segments.append(list(second))
    inputs = preprocessor(tuple(segments) if len(segments) == 2 else segments[0])
    return {key: np.asarray(value) for key, value in inputs.items()}
