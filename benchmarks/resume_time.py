"""Resume time of `kbz pretrain` at step 10 and at step 10,000 of the same run.

    python benchmarks/resume_time.py --repeats 3

The corpus is the bundled examples/data/pretraining/*.txt (1.8 MB of text): as TFRecords
(`kbz create-pretraining-data`, dupe factor 1, 128 tokens, 20 predictions) and as text for
dynamic masking. Batches of 32, so step 10,000 is 320,000 examples in (about 40 passes over
the records, 50 over the text's pairs).

Two measurements, repeated and interleaved (s = 10, 10,000; replay, positioned):
1. data: seconds from building the input (tokenizing the text, counting the records) to the
   first batch of step s, with the replay that resume did before (`stream(0).skip(s)`: every
   batch already trained on is read, parsed, paired and masked again) and with the stream
   positioned at s (`stream(s)`).
2. resume: seconds from the call to `fit_resumable` (restore the checkpoint, position the
   data, trace the step) to the end of the first new step, positioned streams only. The
   checkpoint at step 10,000 is the step-10 checkpoint of a real 10-step run whose
   `state.json` entry says step 10,000: what is measured is the positioning, which depends
   only on the step number, and training 10,000 steps first would take an hour here.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one

import keras  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.cli import main as kbz_main  # noqa: E402
from keras_bert_zoo.data.pretraining import MaskingStream, RecordStream  # noqa: E402
from keras_bert_zoo.pretraining import compile_pretrainer  # noqa: E402
from keras_bert_zoo.training import fit_resumable  # noqa: E402

TEXT = ROOT / "examples" / "data" / "pretraining"
PRESET, BATCH, LENGTH, PREDICTIONS = "bert_tiny_en_uncased", 32, 128, 20


def make_stream(kind: str, records: Path):
    if kind == "records":
        return RecordStream(str(records / "shard-*"), BATCH, LENGTH, PREDICTIONS, seed=0)
    return MaskingStream(
        str(TEXT / "*.txt"),
        kbz.BertTokenizer.from_preset(PRESET),
        kbz.presets.load_preset_config(PRESET).vocabulary_path,
        BATCH,
        max_seq_length=LENGTH,
        max_predictions_per_seq=PREDICTIONS,
        seed=0,
    )


def time_data(kind: str, records: Path, step: int, how: str) -> float:
    begin = time.perf_counter()
    stream = make_stream(kind, records)
    dataset = stream(0).skip(step) if how == "replay" else stream(step)
    next(iter(dataset))
    return time.perf_counter() - begin


class FirstStep(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if not hasattr(self, "at"):
            self.at = time.perf_counter()


def new_model():
    model = kbz.from_preset(PRESET, task="pretrainer", load_weights=False, max_predictions=20)
    optimizer = kbz.training.create_optimizer(1e-4, 20_000, 0.1)
    compile_pretrainer(model, optimizer, jit_compile=False)
    return model


def checkpoint_at(kind: str, records: Path, work: Path) -> Path:
    """A real 10-step run's checkpoint directory (steps 10 and 10,000 read it)."""
    directory = work / f"{kind}-ckpt"
    keras.utils.set_random_seed(0)
    fit_resumable(new_model(), make_stream(kind, records), 10, 10, directory, verbose=0)
    return directory


def time_resume(kind: str, records: Path, checkpoint: Path, step: int, work: Path) -> float:
    directory = work / f"{kind}-{step}"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(checkpoint, directory)
    state = json.loads((directory / "state.json").read_text())
    state["checkpoints"][-1]["step"] = step
    (directory / "state.json").write_text(json.dumps(state))
    model, first = new_model(), FirstStep()
    begin = time.perf_counter()
    stream = make_stream(kind, records)
    fit_resumable(model, stream, step + 1, 10, directory, callbacks=[first], verbose=0)
    return first.at - begin


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, nargs=2, default=(10, 10_000))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="resume_time_"))
    flags = {
        "--input_file": str(TEXT / "*.txt"),
        "--output_file": f"{work}/records/shard@4",
        "--vocab_file": str(kbz.presets.load_preset_config(PRESET).vocabulary_path),
        "--max_seq_length": "128",
        "--max_predictions_per_seq": "20",
        "--dupe_factor": "1",
    }
    assert kbz_main(["create-pretraining-data", *[p for pair in flags.items() for p in pair]]) == 0
    records = work / "records"
    stream = make_stream("records", records)
    print(f"records: {sum(stream.counts())}; text pairs per pass: "
          f"{len(make_stream('text', records).chunks)}", file=sys.stderr)  # fmt: skip
    data = {}
    for _ in range(args.repeats):
        for kind in ("records", "text"):
            for step in args.steps:
                for how in ("replay", "positioned"):
                    seconds = time_data(kind, records, step, how)
                    data.setdefault((kind, step, how), []).append(seconds)
                    print(f"data {kind} step {step} {how}: {seconds:.2f} s", file=sys.stderr)
    resume = {}
    for kind in ("records", "text"):
        checkpoint = checkpoint_at(kind, records, work)
        for _ in range(args.repeats):
            for step in args.steps:
                seconds = time_resume(kind, records, checkpoint, step, work)
                resume.setdefault((kind, step), []).append(seconds)
                print(f"resume {kind} step {step}: {seconds:.2f} s", file=sys.stderr)
    print("| input | step | data, replay (s) | data, positioned (s) | resume to 1st step (s) |")
    print("|---|---|---|---|---|")
    for kind in ("records", "text"):
        for step in args.steps:
            median = lambda v: f"{statistics.median(v):.2f}"  # noqa: E731
            print(
                f"| {kind} | {step:,} | {median(data[kind, step, 'replay'])} | "
                f"{median(data[kind, step, 'positioned'])} | {median(resume[kind, step])} |"
            )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
