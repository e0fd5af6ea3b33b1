"""What both halves of `benchmarks/accelerator.py` share: inputs, seeded weights, the job loop.

numpy only (no Keras, no torch), so the Keras child, the torch child and the parent import it.
"""

import json
import time
import traceback

import numpy as np


def pretraining_batch(batch, length, predictions, vocabulary_size, seed=0):
    """Synthetic MLM + NSP batch `(x, y, sample_weight)`: random ids, every slot a prediction."""
    rng = np.random.default_rng(seed)
    positions = np.sort(
        np.stack(
            [rng.choice(np.arange(1, length - 1), predictions, replace=False) for _ in range(batch)]
        ),
        axis=1,
    )
    x = {
        "token_ids": rng.integers(1000, vocabulary_size, (batch, length)).astype("int32"),
        "segment_ids": (np.arange(length)[None, :] >= length // 2).repeat(batch, 0).astype("int32"),
        "padding_mask": np.ones((batch, length), "int32"),
        "mask_positions": positions.astype("int32"),
    }
    y = {
        "mlm_logits": rng.integers(1000, vocabulary_size, (batch, predictions)).astype("int32"),
        "nsp_logits": rng.integers(0, 2, batch).astype("int32"),
    }
    weights = {
        "mlm_logits": np.ones((batch, predictions), "float32"),
        "nsp_logits": np.ones(batch, "float32"),
    }
    return x, y, weights


def reference_inputs(job):
    """The correctness check's batch: right padding of varied lengths, padded prediction slots.

    Row i has `job["lengths"][i]` real tokens and 15% of them (at least one) masked; the other
    prediction slots point at position 0 with weight 0, as `kbz create-pretraining-data`
    writes them.
    """
    rng = np.random.default_rng(job["seed"])
    lengths, length, predictions = job["lengths"], job["length"], job["predictions"]
    vocabulary_size = job["architecture"]["vocabulary_size"]
    batch = len(lengths)
    mask = (np.arange(length)[None, :] < np.array(lengths)[:, None]).astype("int32")
    positions = np.zeros((batch, predictions), "int32")
    weights = np.zeros((batch, predictions), "float32")
    for row, real in enumerate(lengths):
        count = min(predictions, max(1, round(0.15 * real)), real - 1)
        positions[row, :count] = np.sort(rng.choice(np.arange(1, real), count, replace=False))
        weights[row, :count] = 1.0
    x = {
        "token_ids": rng.integers(1000, vocabulary_size, (batch, length)).astype("int32") * mask,
        "segment_ids": (np.arange(length)[None, :] >= np.array(lengths)[:, None] // 2) * mask,
        "padding_mask": mask,
        "mask_positions": positions,
    }
    x["segment_ids"] = x["segment_ids"].astype("int32")
    y = {
        "mlm_logits": rng.integers(1000, vocabulary_size, (batch, predictions)).astype("int32"),
        "nsp_logits": rng.integers(0, 2, batch).astype("int32"),
    }
    return x, y, {"mlm_logits": weights, "nsp_logits": np.ones(batch, "float32")}


def seeded_values(variables, seed) -> dict:
    """`{path: array}` for every float variable `(path, shape, dtype)`, drawn in path order.

    Drawn by numpy, so CPU and GPU (and every Keras backend) start from the same weights;
    LayerNorm scales near 1, everything else N(0, 0.02) as BERT initialises.
    """
    rng = np.random.default_rng(seed)
    values = {}
    for path, shape, dtype in sorted(variables):
        if "float" not in str(dtype):
            continue  # the dropout layers' seed state
        noise = rng.standard_normal(shape).astype("float32")
        values[path] = 1.0 + 0.05 * noise if path.endswith("gamma") else 0.02 * noise
    return values


def is_out_of_memory(error) -> bool:
    text = f"{type(error).__name__}: {error}".lower()
    return any(key in text for key in ("resource_exhausted", "out of memory", "outofmemory"))


def run_jobs(plan_path, runners, results_path, deadline, environment, cleanup=None):
    """Runs the plan's jobs for this child in order, appending one JSON line per job.

    The first line is `environment` (the device and versions the child sees).
    A job starts only if at least its `min_seconds` remain before `deadline` (a Unix time);
    the others are written as skipped, so the table says what did not run and why. One line
    per finished job, flushed at once: rows survive a child the parent had to stop.
    """
    with open(plan_path) as handle:
        jobs = json.load(handle)
    deadline = float(deadline)
    with open(results_path, "a") as out:
        out.write(json.dumps({"part": "environment", **environment}) + "\n")
        for job in jobs:
            row = {"name": job["name"], "part": job["part"], "impl": job["impl"]}
            remaining = deadline - time.time()
            if remaining < job["min_seconds"]:
                row["skipped"] = f"time budget: {remaining:.0f} s left, needs ~{job['min_seconds']}"
            else:
                start = time.perf_counter()
                try:
                    row.update(runners[job["part"]](job))
                except Exception as error:  # noqa: BLE001 (reported in the table, not hidden)
                    row["error"] = f"{type(error).__name__}: {str(error)[:300]}"
                    traceback.print_exc()
                row["seconds"] = time.perf_counter() - start
                if cleanup is not None:
                    cleanup()
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps(row), flush=True)
