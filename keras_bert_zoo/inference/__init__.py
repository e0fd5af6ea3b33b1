"""Inference over inputs larger than memory: the engine `kbz embed`, `kbz predict` and the
Apache Beam handler share.

- `streaming`: `stream`, the loop: records in windows, each window predicted (sorted by
  length inside, `training.bucketed_prediction`), written, then committed; `Progress`;
- `outputs`: `StreamOutput`, an output file written in place and resumable after a kill
  (`NpyRows`: a preallocated `.npy`; `TextRows`: lines appended in input order).

>>> with StreamOutput("vectors.npy", identity, NpyRows(rows, 384)) as output:
...     stream(records, embed_window, output, window=10_000)
"""
