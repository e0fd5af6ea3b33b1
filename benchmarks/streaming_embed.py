"""`kbz embed` streamed: peak resident memory and throughput at several input sizes, and the
cost of a resume (the same command on a finished window boundary).

    python benchmarks/streaming_embed.py --model bert_tiny_en_uncased --lines 10000 100000

Each size runs `kbz embed` in a fresh process (`/usr/bin/time -v` gives the peak RSS).
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _corpus(path: Path, lines: int) -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    with open(path, "w") as handle:
        for _ in range(lines):
            handle.write(" ".join(rng.choice(words, rng.integers(3, 30))) + "\n")


def _run(command: list[str]) -> tuple[float, float]:
    began = time.monotonic()
    result = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "keras_bert_zoo.cli", *command],
        capture_output=True,
        text=True,
        check=True,
    )
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)[1])
    return time.monotonic() - began, peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--window", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for lines in args.lines:
            corpus, output = Path(root) / f"{lines}.txt", Path(root) / f"{lines}.npy"
            _corpus(corpus, lines)
            command = ["embed", "--model", args.model, "--input", str(corpus)]
            command += ["--output", str(output), "--window", str(args.window)]
            seconds, peak = _run(command)
            rate = lines / seconds
            print(
                f"{lines:>9,} lines: {seconds:6.1f} s, {rate:7,.0f} lines/s, peak {peak:,.0f} MiB"
            )


if __name__ == "__main__":
    main()
