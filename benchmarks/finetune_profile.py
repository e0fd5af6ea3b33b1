"""Where one `kbz finetune` run's time goes: start-up, compiles, steps, validation, writes.

Runs `kbz finetune TASK ...` in this process (the command line's own code path, default flags
unless given) with timers wrapped around its phases, and prints one table: imports, reading
and tokenizing, building the model, each training step (the first step of each batch length
includes its XLA compile: reported as that step minus the median step of the same length),
validation per epoch (the first also compiles the prediction programs), checkpoint writes,
the final prediction pass and files, `model.keras`, `preset/` and the SavedModel export.

    python benchmarks/finetune_profile.py tag --preset minilm \
        --train examples/data/wnut17_train_sample.conll \
        --validation examples/data/wnut17_dev_sample.conll --output /tmp/profile
"""

import time

BEGIN = time.perf_counter()

import collections  # noqa: E402  (the clock starts before any import)
import statistics  # noqa: E402
import sys  # noqa: E402

from keras_bert_zoo.cli import main  # noqa: E402
from keras_bert_zoo.jobs import finetune as runs  # noqa: E402

IMPORTED = time.perf_counter()
PHASES = collections.defaultdict(list)  # label -> seconds of each call
STEPS = []  # (bucket length, seconds) of every training step


def timed(owner, name: str, label: str) -> None:
    """Wraps `owner.name` so each call's duration is added to `PHASES[label]`."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            PHASES[label].append(time.perf_counter() - start)

    setattr(owner, name, wrapper)


SCHEDULES = []  # the run's batch schedule (length buckets or packed rows)


def step_length(step: int) -> int:
    """The token length of training step `step`'s batch."""
    schedule = SCHEDULES[-1]
    return getattr(schedule, "row_length", None) or schedule.batch(step)[1]


class Validation(runs.ValidationCallback):
    """The run's validation callback, which also times every training step."""

    def on_train_batch_begin(self, batch, logs=None):
        self._began = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        STEPS.append((step_length(len(STEPS)), time.perf_counter() - self._began))


def install() -> None:
    schedule = runs.training_schedule
    runs.training_schedule = lambda *a, **k: SCHEDULES.append(schedule(*a, **k)) or SCHEDULES[-1]
    runs.ValidationCallback = Validation
    timed(runs.BertPreprocessor, "from_preset", "preprocessor (vocabulary)")
    for task in runs.FINETUNING_TASKS.values():
        timed(task, "read", "read files")
        timed(task, "arrays", "tokenize")
        timed(task, "write_predictions", "write predictions file")
    timed(runs, "from_preset", "build model + load weights")
    timed(runs.ProcessRun, "__enter__", "run directory (fingerprints, lock)")
    timed(Validation, "on_epoch_end", "validation (per epoch)")
    timed(runs.fit_resumable.__globals__["ResumeCheckpoint"], "_save", "checkpoint write")
    timed(Validation, "restore_best", "restore best weights")
    timed(runs.bucketed_prediction, "predict", "prediction pass (incl. validation's)")
    timed(runs, "save_model_file", "model.keras")
    timed(runs, "save_preset", "preset/")
    timed(runs.exports, "export_saved_model", "SavedModel export")
    timed(runs, "fit_resumable", "fit (steps + callbacks)")


def report(total: float) -> str:
    lines = ["| phase | calls | seconds |", "|---|---|---|"]
    lines.append(f"| imports (TensorFlow, Keras, package) | 1 | {IMPORTED - BEGIN:.1f} |")
    for label, seconds in PHASES.items():
        each = ", ".join(f"{s:.1f}" for s in seconds) if len(seconds) <= 4 else ""
        lines.append(
            f"| {label} | {len(seconds)} | {sum(seconds):.1f} {f'({each})' if each else ''} |"
        )
    by_length = collections.defaultdict(list)
    for length, seconds in STEPS:
        by_length[length].append(seconds)
    compile_total = 0.0
    for length, seconds in sorted(by_length.items()):
        median = statistics.median(seconds)
        first = seconds[0] - median
        compile_total += first
        lines.append(
            f"| steps of length {length} | {len(seconds)} | {sum(seconds):.1f} "
            f"(median {median:.3f}; first step's extra (compile) {first:.1f}) |"
        )
    lines.append(f"| all train compiles (first step of each length) | | {compile_total:.1f} |")
    lines.append(f"| total, process start to exit | | {total:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    install()
    status = main(["finetune", *sys.argv[1:], "--overwrite"])
    print(report(time.perf_counter() - BEGIN))
    sys.exit(status)
