"""`kbz embed` streamed: peak resident memory and throughput at several input sizes, the
in-memory path of an older checkout beside it, the cost of a resume, and the Apache Beam
example on two local workers; with `--rerank`, `kbz predict rerank` (streamed) on as many
labelled (query, passage) pairs.

    python benchmarks/streaming_embed.py --model bert_tiny_en_uncased --lines 10000 100000 \\
        [--baseline OTHER_CHECKOUT] [--resume] [--beam] [--rerank RERANKER]

Each run is a fresh `kbz embed` process (`/usr/bin/time -v` gives the peak RSS; the wall time
includes the start-up). `--baseline` runs the same command from another checkout (the
in-memory `kbz embed` before streaming) on the smallest size, interleaved with this one.
`--resume` kills the largest run with SIGKILL at `--kills` random points (the same command
again after each), reports how long the last run took to read past the rows committed, and
compares its output with the uninterrupted run's byte for byte. `--beam` runs
`examples/beam_embed.py` (the `beam` extra) on the smallest size with two worker processes.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _corpus(path: Path, lines: int) -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    with open(path, "w") as handle:
        for _ in range(lines):
            handle.write(" ".join(rng.choice(words, rng.integers(3, 30))) + "\n")


def _pairs(path: Path, corpus: Path, queries: int = 1000) -> None:
    """A labelled pairs TSV of `corpus`'s lines as passages, each for one of `queries`
    queries (a query's pairs scattered over the file), about one in five relevant."""
    rng = np.random.default_rng(0)
    with open(corpus) as lines, open(path, "w") as handle:
        handle.write("query\tpassage\tlabel\n")
        for line in lines:
            query, label = rng.integers(queries), int(rng.random() < 0.2)
            handle.write(f"query {query} w{query}\t{line.strip()}\t{label}\n")


def _run(arguments: list[str], checkout: Path = ROOT) -> tuple[float, float, str]:
    began = time.monotonic()
    result = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, *arguments],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), *sys.path[1:]])},
    )
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)[1])
    return time.monotonic() - began, peak / 1024, result.stdout


def _show(what: str, lines: int, seconds: float, peak: float) -> None:
    rate = lines / seconds
    print(f"{what:>10} {lines:>9,} lines: {seconds:6.1f} s, {rate:7,.0f} lines/s, {peak:,.0f} MiB")


def _resume(command: list[str], output: Path, lines: int, kills: int) -> None:
    """Kills the run with SIGKILL once the rows committed pass each of `kills` random points
    (in order, each kill followed by the same command again), lets the last run finish, and
    compares its output with the uninterrupted run's, byte for byte."""
    uninterrupted = output.with_name(f"uninterrupted-{output.name}")
    output.rename(uninterrupted)
    record = output.with_name(f".{output.name}.progress.json")
    points = sorted(np.random.default_rng(1).integers(lines // 10, lines * 9 // 10, kills))
    for point in points:
        process = subprocess.Popen(
            [sys.executable, *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        while process.poll() is None:
            if record.is_file() and json.loads(record.read_text())["rows"] >= point:
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.05)
        process.wait()
        done = json.loads(record.read_text())["rows"] if record.is_file() else 0
        print(f"    killed past row {point:,}: {done:,} rows committed")
    seconds, peak, out = _run(command)
    skipped = re.search(r"continuing after the (\d+) rows .* in ([\d.]+) s", out)
    same = output.read_bytes() == uninterrupted.read_bytes()
    print(
        f"    resume: {int(skipped[1]):,} rows read past in {skipped[2]} s (run {seconds:.1f} s);"
        f" output {'equal to' if same else 'DIFFERENT from'} the uninterrupted run's"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--window", type=int, default=10_000)
    parser.add_argument("--baseline", type=Path, help="a checkout with the in-memory kbz embed")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs before the resume")
    parser.add_argument("--beam", action="store_true")
    parser.add_argument("--rerank", help="a reranker preset: `kbz predict rerank` too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for lines in args.lines:
            corpus, output = Path(root) / f"{lines}.txt", Path(root) / f"{lines}.npy"
            _corpus(corpus, lines)
            command = ["-m", "keras_bert_zoo.cli", "embed", "--model", args.model]
            command += ["--input", str(corpus), "--output", str(output)]
            if args.baseline and lines == min(args.lines):
                _show("in-memory", lines, *_run(command, args.baseline)[:2])
            _show("streamed", lines, *_run([*command, "--window", str(args.window)])[:2])
            if args.baseline and lines == min(args.lines):
                _show("in-memory", lines, *_run(command, args.baseline)[:2])
            if args.beam and lines == min(args.lines):
                beam = [str(ROOT / "examples" / "beam_embed.py"), "--model", args.model]
                beam += ["--input", str(corpus), "--output", str(Path(root) / "beam" / "v")]
                beam += ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
                _show("beam x2", lines, *_run(beam)[:2])
            if args.rerank:
                pairs = Path(root) / f"{lines}.pairs.tsv"
                _pairs(pairs, corpus)
                rerank = ["-m", "keras_bert_zoo.cli", "predict", "rerank", "--model", args.rerank]
                rerank += [
                    "--input",
                    str(pairs),
                    "--output",
                    str(Path(root) / f"{lines}.scores.tsv"),
                ]
                _show("rerank", lines, *_run([*rerank, "--window", str(args.window)])[:2])
            if args.resume and lines == max(args.lines):
                _resume([*command, "--window", str(args.window)], output, lines, args.kills)


if __name__ == "__main__":
    main()
