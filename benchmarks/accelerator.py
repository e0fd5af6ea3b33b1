"""The GPU proof in one command (issue 27): correctness and speed of BERT on an accelerator.

Prints one table: the device, driver and versions; a seeded bert_tiny's outputs before and
after one AdamW step in float32 (highest matmul precision) against a fixture recorded on CPU
(`tests/fixtures/accelerator_reference.npz`, tolerance 1e-4 as |got - ref| / (1 + |ref|)),
and mixed bfloat16 staying finite; BERT-large and BERT-base MLM + NSP pretraining steps
(mixed_bfloat16, XLA, `model.fit`) at sequence 128 with the largest batch up to 256 that fits
and at sequence 512 (up to 64: the same tokens per step), in sequences/s and MFU against the
chip's dense bf16 data-sheet peak (H100 SXM and H200: 989.4 TFLOP/s); the same steps through
transformers' `BertForPreTraining` (bf16 autocast, SDPA, `torch.compile`, fused AdamW) as the
anchor; BERT-base classifier fine-tuning and inference at sequence 128, with fused attention on
and off (attention dropout 0; `kbz.encoder.set_attention` switches the kernel).
FLOPs are model FLOPs (benchmarks/flops.py):
6 x (encoder matmul parameters x L + MLM head parameters x masked positions) + 12 x layers x
hidden x L^2 for attention; inference is a third of a classifier's training step.

The Keras half runs on JAX with `import tensorflow` blocked (the GPU image has no TensorFlow),
then the torch half, each in its own child process so each has the whole GPU. Jobs run in order
of importance (correctness, BERT-large at 128, BERT-base at 128, fine-tuning, inference, then
sequence 512) within `--budget-s`; a job that would not fit is listed as skipped. Compiled
programs are kept in /tmp (JAX's and inductor's caches), so a rerun on the same machine
compiles less.

    python benchmarks/accelerator.py --smoke      # CPU, bert_tiny, tiny batches (make test runs it)
    python benchmarks/accelerator.py --record     # re-record the CPU fixture (JAX, float32)

On the GPU machine (Python 3.12, JAX with CUDA, torch, transformers; no Keras, no TensorFlow):
first `benchmarks/device/fetch_wheels.sh` here (Keras and the two packages it needs that the
image lacks, into the ignored `.device_wheels/`, about 2.8 MB), then the device tool's `run`
with `carry: [".device_wheels"]`, `timeout_s: 390` (15 minutes of device time hold a start,
this run and one rerun) and the command:

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
        .device_wheels/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 && \
        python3 benchmarks/accelerator.py --budget-s 300 --json $OUT/accelerator.json
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from keras_bert_zoo.architecture import ARGUMENTS
from keras_bert_zoo.presets import load_preset_config

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
REFERENCE = ROOT / "tests" / "fixtures" / "accelerator_reference"
TOLERANCE = 1e-4
KERAS_SHARE = 0.55  # of the budget, for the Keras child; the torch child gets the rest
PACKAGES = ("jax", "jaxlib", "jax-cuda13-plugin", "keras", "numpy", "torch", "transformers")


def architecture(preset: str, **changes) -> dict:
    return {**load_preset_config(preset).architecture, **changes}


def attention_variants() -> dict:
    """`{variant: (architecture changes, fused switch)}` for fused attention on and off.

    With `attention_dropout` (BERT's own dropout of attention probabilities would keep the
    explicit path in training), both run it at 0, and the Keras child switches the kernel with
    `kbz.encoder.set_attention`: the same math, fused or explicit.
    """
    if "attention_dropout" in ARGUMENTS:
        return {
            "fused": ({"attention_dropout": 0.0}, True),
            "unfused": ({"attention_dropout": 0.0}, False),
        }
    return {"unfused": ({}, None)}  # no such option: today's path only


def correctness_job(record: bool) -> dict:
    return {
        "name": "bert_tiny correctness",
        "part": "correctness",
        "impl": "Keras/JAX",
        "min_seconds": 0,
        "architecture": architecture("bert_tiny_en_uncased", dropout=0.0),
        "seed": 20261126,
        "length": 128,
        "lengths": [128, 120, 100, 77, 64, 50, 33, 20],
        "predictions": 20,
        "vocabulary_stride": 61,
        "bf16_steps": 3,
        "tolerance": TOLERANCE,
        "record": record,
        "reference": str(REFERENCE.with_suffix(".npz")),
    }


def plan(args) -> tuple[list, list]:
    """(Keras jobs, torch jobs), most important first."""
    if args.smoke:  # the same code on CPU: bert_tiny, tiny batches, 1-2 steps each
        models = {"bert_tiny": "bert_tiny_en_uncased"}  # first: pretraining; last: fine-tuning
        shapes, lengths = {128: ([4], 4)}, {128: 32}  # sequence 512 is the same code
        timing = {"warmup_steps": 1, "steps": 2, "repeats": 1}
        finetune_batches, inference_batches, minimum = [4], [4], {}
    else:
        models = {"bert_large": "bert_large_en_uncased", "bert_base": "bert_base_en_uncased"}
        shapes = {128: ([256, 128, 64], 20), 512: ([64, 32, 16], 80)}
        lengths = {128: 128, 512: 512}
        timing = {"warmup_steps": 2, "steps": 10, "repeats": 2}
        finetune_batches, inference_batches = [64, 32], [256, 128]
        # rough compile + run seconds of each job, guessed before any GPU run: a job starts
        # only if this much of its child's budget is left
        minimum = {"bert_base": 40, "bert_large": 60, "torch": 30, "finetune": 25}

    def pretrain(impl, size, length, extra=0):
        batches, predictions = shapes[length]
        job = {
            "name": f"pretrain {size} seq {lengths[length]}",
            "part": "pretrain",
            "impl": impl,
            "min_seconds": minimum.get(size, 0) + extra,
            "architecture": architecture(models[size]),
            "length": lengths[length],
            "batches": batches,
            "predictions": predictions,
            **timing,
        }
        if impl == "transformers/torch":  # torch.compile's first steps include recompiles
            job.update(compile=not args.smoke, warmup_steps=max(timing["warmup_steps"], 3))
        return job

    keras_jobs = [correctness_job(record=False)]
    sizes, small = list(models), list(models)[-1]
    keras_jobs += [pretrain("Keras/JAX", size, 128) for size in sizes]
    for part, batches in (("finetune", finetune_batches), ("inference", inference_batches)):
        for variant, (changes, fused) in attention_variants().items():
            keras_jobs.append(
                {
                    "name": f"{part} {small} classifier seq {lengths[128]}, {variant} attention",
                    "part": part,
                    "impl": "Keras/JAX",
                    "min_seconds": minimum.get("finetune", 0),
                    "architecture": architecture(models[small], **changes),
                    "fused_attention": fused,
                    "length": lengths[128],
                    "batches": batches,
                    **timing,
                    "steps": 2 * timing["steps"],
                }
            )
    keras_jobs += [
        pretrain("Keras/JAX", size, length) for length in shapes if length != 128 for size in sizes
    ]
    torch_jobs = [
        pretrain("transformers/torch", size, length, extra=minimum.get("torch", 0))
        for length in shapes
        for size in sizes
    ]
    if args.only:  # comma-separated parts of job names
        wanted = args.only.split(",")
        keras_jobs = [job for job in keras_jobs if any(w in job["name"] for w in wanted)]
        torch_jobs = [job for job in torch_jobs if any(w in job["name"] for w in wanted)]
    return keras_jobs, torch_jobs


def versions() -> str:
    found = []
    for package in PACKAGES:
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"Python {platform.python_version()}; " + ", ".join(found)


def gpu_description() -> str:
    if shutil.which("nvidia-smi") is None:
        return "none (no nvidia-smi): CPU"
    query = "--query-gpu=name,driver_version,memory.total"
    result = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
    )
    return result.stdout.strip().replace(", ", ", driver ", 1) or result.stderr.strip()


def run_child(module: str, jobs: list, deadline: float, results: Path, smoke: bool) -> None:
    """Runs `benchmarks/<module>.py` on `jobs` until `deadline`; stops it 30 s after that."""
    if not jobs:
        return
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(jobs, handle)
    paths = [str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path for path in paths if path),
        "KERAS_BACKEND": "jax",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONUNBUFFERED": "1",
    }
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")  # torch runs after, not beside
    env.setdefault("JAX_COMPILATION_CACHE_DIR", "/tmp/kbz-accelerator-jax-cache")
    if smoke:  # the same code on the CPU, whatever this machine has
        env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, str(HERE / f"{module}.py"), handle.name, str(results), str(deadline)]
    row = None
    try:
        child = subprocess.run(command, env=env, timeout=max(deadline - time.time(), 0) + 30)
        if child.returncode:  # a crash outside the jobs, an import say: the table must say so
            error = f"exited with status {child.returncode} (its traceback is above)"
            row = {"part": "child", "name": module, "impl": "process", "error": error}
    except subprocess.TimeoutExpired:
        row = {"part": "stopped", "name": module, "impl": module}
    finally:
        os.unlink(handle.name)
    if row is not None:
        with open(results, "a") as out:
            out.write(json.dumps(row) + "\n")


def describe(row: dict) -> str:
    if "skipped" in row:
        return f"skipped ({row['skipped']})"
    if "error" in row:
        return f"ERROR {row['error']}"
    if row["part"] == "correctness" and "recorded" in row:
        return f"recorded {row['recorded']}"
    if row["part"] == "correctness":
        verdict = "PASS" if row["passed"] else "FAIL"
        bf16 = "finite: PASS" if row["bf16_finite"] else "NOT FINITE: FAIL"
        losses = ", ".join(f"{loss:.4f}" for loss in row["bf16_losses"])
        return (
            f"float32: max error {row['max_error']:.1e} (tolerance {row['tolerance']:.0e}, "
            f"worst {row['worst']}): {verdict}; mixed_bfloat16 losses {losses} "
            f"(first - float32 {row['bf16_loss_vs_float32']:+.1e}), {bf16}"
        )
    mfu = f", MFU {100 * row['mfu']:.1f}%" if row["mfu"] is not None else ""
    loss = f", loss {row['loss']:.3f}" if row.get("loss") is not None else ""
    note = f"; {row['note']}" if row.get("note") else ""
    finite = "" if row["finite"] else ", NOT FINITE"
    eager = ", eager (no torch.compile)" if row.get("compiled") is False else ""
    return (
        f"batch {row['batch']}: {row['sequences_per_second']:.1f} seq/s, "
        f"{row['tflops']:.3g} TFLOP/s{mfu}; first call {row['first_seconds']:.0f} s "
        f"(compile, warm-up){eager}{loss}{finite}{note}"
    )


def ratios(rows: list) -> list:
    """Keras/JAX over transformers/torch sequences/s, for each job both measured."""
    speed = {
        (row["impl"], row["name"]): row["sequences_per_second"]
        for row in rows
        if "sequences_per_second" in row
    }
    return [
        ("ratio", f"Keras/JAX / transformers {name}", f"{speed[('Keras/JAX', name)] / torch:.2f}x")
        for (impl, name), torch in speed.items()
        if impl == "transformers/torch" and ("Keras/JAX", name) in speed
    ]


def table(rows: list, header: list) -> str:
    lines = ["| part | what | result |", "|---|---|---|"]
    cells = list(header)
    for row in rows:
        if row["part"] == "environment":
            blocked = "; `import tensorflow` blocked" if row.get("tensorflow_blocked") else ""
            cells.append(("environment", f"{row['impl']} device", row["device"] + blocked))
        elif row["part"] == "stopped":
            cells.append(("stopped", row["name"], "stopped at its deadline (+30 s)"))
        else:
            cells.append((row["part"], f"{row['impl']} {row['name']}", describe(row)))
    cells += ratios(rows)
    return "\n".join(lines + [f"| {a} | {b} | {c} |" for a, b, c in cells])


def failed(rows: list) -> bool:
    return any(
        "error" in row
        or row["part"] == "stopped"
        or (row["part"] == "correctness" and "passed" in row and not row["passed"])
        or (row["part"] == "correctness" and "bf16_finite" in row and not row["bf16_finite"])
        or row.get("finite") is False
        for row in rows
    )


def record(results: Path) -> None:
    """Records the fixture on this CPU with JAX, with its provenance beside it."""
    job = correctness_job(record=True)
    run_child("accelerator_keras", [job], time.time() + 600, results, smoke=True)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    if failed(rows) or not any("recorded" in row for row in rows):
        raise SystemExit(f"recording failed: {rows}")
    provenance = {
        "what": "bert_tiny_en_uncased pretrainer (dropout 0), weights drawn by numpy "
        "(accelerator_common.seeded_values); outputs before and after one step of "
        "create_optimizer(1e-3, total_steps=100, warmup_fraction=0) through train_on_batch",
        "recorded_with": f"{versions()}; KERAS_BACKEND=jax on CPU, float32",
        "device": [row["device"] for row in rows if row["part"] == "environment"],
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/accelerator.py --record",
        "tolerance": f"{TOLERANCE}: max |got - ref| / (1 + |ref|) over every array",
        "inputs": {key: job[key] for key in ("seed", "length", "lengths", "predictions")},
        "arrays": "{before,after}_{nsp_logits, mlm_logits[:, :, ::61], mlm_logsumexp}, "
        "step_losses (loss, MLM loss, NSP loss)",
    }
    REFERENCE.with_suffix(".json").write_text(json.dumps(provenance, indent=2) + "\n")
    print(json.dumps(provenance, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="CPU, bert_tiny, tiny batches")
    parser.add_argument("--record", action="store_true", help="re-record the CPU fixture")
    parser.add_argument("--budget-s", type=float, default=300.0, help="seconds for all jobs")
    parser.add_argument(
        "--only", default=None, help="run only jobs whose names contain one of these (a,b,...)"
    )
    parser.add_argument("--json", default=None, help="also write every row here")
    args = parser.parse_args()
    start = time.time()
    results = Path(tempfile.mkdtemp(prefix="kbz-accelerator-")) / "rows.jsonl"
    if args.record:
        record(results)
        return 0
    budget = 3600.0 if args.smoke else args.budget_s
    keras_jobs, torch_jobs = plan(args)
    header = [("environment", "GPU", gpu_description()), ("environment", "versions", versions())]
    run_child("accelerator_keras", keras_jobs, start + KERAS_SHARE * budget, results, args.smoke)
    run_child("accelerator_torch", torch_jobs, start + budget, results, args.smoke)
    rows = (
        [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    )
    print(
        f"\nbenchmarks/accelerator.py{' --smoke' if args.smoke else ''}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{time.time() - start:.0f} s\n"
    )
    print(table(rows, header))
    print("\nMFU: model FLOPs (benchmarks/flops.py) over the dense bf16 data-sheet peak.")
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "rows": rows}, indent=2))
    return 1 if failed(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
