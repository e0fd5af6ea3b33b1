"""Sequence packing: several tokenized examples per row, so that padding is not computed.

`pack` places examples into rows of `row_length` tokens by best-fit decreasing (longest
first, each into the fullest row it still fits; Graphcore's packing paper and MosaicBERT use
the same greedy family). It is written here because it is a dozen lines over capacity
buckets (O(examples x row_length)); the `binpacking` package's constant-volume heuristic
is quadratic in the number of examples and adds a dependency for one loop.

A packed row carries, beside keras-hub's `token_ids`/`segment_ids`/`padding_mask`:
`sequence_ids` (1, 2, ... for the examples of the row, 0 for padding) and `position_ids`
(restarting at 0 for each example), the inputs of `kbz.packed_encoder.build_packed_encoder`;
and per example its row and `[CLS]` index, which heads read (`example_row`, `example_start`,
`example_sequence`, `example_length`, in the order the examples were given).
"""

import numpy as np


def pack_rows(lengths, row_length: int) -> list[list[int]]:
    """Indices of the examples in each row: every example once, no row over `row_length`.

    >>> pack_rows([3, 5, 2, 4], 8)
    [[1, 0], [3, 2]]
    """
    lengths = [int(n) for n in lengths]
    for i, n in enumerate(lengths):
        if not 0 < n <= row_length:
            raise ValueError(
                f"Every example must have 1 to row_length={row_length} tokens to be packed. "
                f"Received: example {i} of length {n}; truncate it or raise `row_length`."
            )
    rows: list[list[int]] = []
    # free[c]: rows with exactly c token positions left, as a stack of row indices
    free: list[list[int]] = [[] for _ in range(row_length + 1)]
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        n = lengths[i]
        fit = next((c for c in range(n, row_length + 1) if free[c]), None)
        if fit is None or fit == row_length:
            rows.append([])
            row, fit = len(rows) - 1, row_length
        else:
            row = free[fit].pop()
        rows[row].append(i)
        free[fit - n].append(row)
    return rows


def pack(examples: dict, row_length: int, rows=None) -> dict:
    """Packs unpacked, padded examples into rows of `row_length` tokens.

    Args:
        examples: numpy `token_ids`, `segment_ids`, `padding_mask` of shape `[examples,
            length]` (any padded length), real tokens first in each row.
        row_length: tokens per packed row.
        rows: the examples of each row (`pack_rows`' form, every example once), if chosen
            already (a training batch: some rows of its epoch's packing).

    Returns a dict of int32 arrays: `token_ids`, `segment_ids`, `padding_mask`,
    `sequence_ids`, `position_ids` (`[rows, row_length]`) and `example_row`,
    `example_start`, `example_sequence`, `example_length` (`[examples]`: example i is
    `sequence_ids == example_sequence[i]` in row `example_row[i]`, its `[CLS]` at
    `example_start[i]`).

    >>> ids = np.array([[2, 5, 3, 0], [2, 3, 0, 0]])
    >>> out = pack({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids > 0}, 6)
    >>> out["token_ids"].tolist(), out["sequence_ids"].tolist()
    ([[2, 5, 3, 2, 3, 0]], [[1, 1, 1, 2, 2, 0]])
    """
    lengths = np.asarray(examples["padding_mask"]).astype(bool).sum(axis=1)
    rows = pack_rows(lengths, row_length) if rows is None else rows
    shape = (len(rows), row_length)
    out = {
        key: np.zeros(shape, "int32")
        for key in ("token_ids", "segment_ids", "padding_mask", "sequence_ids", "position_ids")
    }
    count = len(lengths)
    placement = {
        k: np.zeros(count, "int32") for k in ("example_row", "example_start", "example_sequence")
    }
    for r, members in enumerate(rows):
        start = 0
        for j, i in enumerate(members):
            n = int(lengths[i])
            span = slice(start, start + n)
            out["token_ids"][r, span] = examples["token_ids"][i, :n]
            out["segment_ids"][r, span] = examples["segment_ids"][i, :n]
            out["padding_mask"][r, span] = 1
            out["sequence_ids"][r, span] = j + 1
            out["position_ids"][r, span] = np.arange(n)
            placement["example_row"][i], placement["example_start"][i] = r, start
            placement["example_sequence"][i] = j + 1
            start += n
    return {**out, **placement, "example_length": lengths.astype("int32")}


def padding_fraction(lengths, row_length: int, packed: bool = True) -> float:
    """Token positions computed per real token: rows x `row_length` / sum of lengths."""
    total = int(np.sum(lengths))
    rows = len(pack_rows(lengths, row_length)) if packed else len(lengths)
    return rows * row_length / total
