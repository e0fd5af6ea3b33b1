"""The example scripts and the demo run end to end in their fast mode (real data, real
checkpoint, a few steps), as a user would run them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(arguments, tmp_path, env=None):
    result = subprocess.run(
        [sys.executable, *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize(
    "script, expected",
    [
        ("classify_sst2.py", "held-out accuracy"),
        ("tag_wnut17.py", "dev entity precision"),
        ("squad_qa.py", "held-out exact match"),
        ("pretrain_tiny.py", "mlm_logits_loss"),
    ],
)
def test_example_fast_mode(script, expected, tmp_path, minilm_preset):
    preset = ["--preset", str(minilm_preset)] if script != "pretrain_tiny.py" else []
    output = _run([str(EXAMPLES / script), "--fast", "--output", str(tmp_path), *preset], tmp_path)
    assert expected in output


def test_demo_fast_mode(tmp_path):
    output = _run([str(EXAMPLES / "demo.py")], tmp_path, env={"KBZ_DEMO_FAST": "1"})
    for expected in ("cosine", "held-out accuracy", "MLM loss", "P(positive)", "Demo finished"):
        assert expected in output
