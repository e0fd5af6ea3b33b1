"""`benchmarks/accelerator.py --smoke`: the GPU proof's code, run on this CPU (issue 27).

Collected only in the JAX process of `make test-e2e` (conftest.py). The benchmark's Keras
half runs with `import tensorflow` blocked, as on the GPU image, which has none: a stray
TensorFlow import on the model, compile or `fit` path is an error row and a non-zero exit. The
correctness rows compare against the fixture recorded on CPU, so here they must pass exactly.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.e2e  # the benchmark script in its own interpreter


def test_accelerator_smoke_runs_every_part_without_tensorflow(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/accelerator.py"),
            "--smoke",
            "--json",
            str(tmp_path / "rows.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    output = result.stdout + result.stderr[-3000:]
    assert result.returncode == 0, output
    table = result.stdout[result.stdout.index("| part | what | result |") :]
    assert "ERROR" not in table and "skipped" not in table, table
    assert "float32: max error" in table and ": PASS; mixed_bfloat16" in table, table
    assert "finite: PASS" in table, table
    for what in (
        "Keras/JAX pretrain bert_tiny seq 32",
        "transformers/torch pretrain bert_tiny seq 32",
        "Keras/JAX finetune bert_tiny classifier seq 32",
        "Keras/JAX inference bert_tiny classifier seq 32",
    ):
        rows = [line for line in table.splitlines() if what in line]
        assert rows and all("seq/s" in row for row in rows), (what, table)
    assert "| ratio | Keras/JAX / transformers pretrain bert_tiny seq 32 |" in table, table
    assert "| environment | Keras/JAX device | cpu: cpu; `import tensorflow` blocked |" in table
