"""Warnings for examples cut by the sequence length: one line per file, with a count.

A text longer than `--sequence-length` tokens loses its end without a trace in the
predictions, so the reading of every file counts how many examples were truncated, names
the longest (file line and token count) and the flag that keeps more of them.
"""

import logging

import numpy as np

logger = logging.getLogger(__name__)


def full_rows(padding_mask) -> np.ndarray:
    """Indices of the rows whose every position holds a token (the only ones that may have
    been truncated)."""
    return np.flatnonzero(np.asarray(padding_mask).all(axis=1))


def warn_truncated(source, what: str, lengths: dict, total: int, sequence_length: int) -> None:
    """Warns when some of `total` examples (`lengths`: line -> tokens, [CLS] and [SEP] included)
    exceed `sequence_length` tokens; silent when none does."""
    cut = {line: n for line, n in lengths.items() if n > sequence_length}
    if not cut:
        return
    line, longest = max(cut.items(), key=lambda item: item[1])
    kept = sequence_length / longest
    logger.warning(
        "%s: %d of %d %s are longer than --sequence-length %d tokens and were truncated to it "
        "(the longest, line %d, has %d tokens: %.0f%% of it dropped). Pass a larger "
        "--sequence-length (at most the preset's max_sequence_length) to keep more.",
        source,
        len(cut),
        total,
        what,
        sequence_length,
        line,
        longest,
        100 * (1 - kept),
    )
