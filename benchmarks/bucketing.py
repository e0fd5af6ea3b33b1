"""Length bucketing vs full padding: fine-tuning steps/s and prediction sequences/s.

    python benchmarks/bucketing.py                          # bert_tiny shape, 3 rounds
    python benchmarks/bucketing.py --preset bert_mini_en_uncased --steps 20

The SST-2 sample bundled with the examples (`examples/data/sst2_sample.tsv`, 3,000
sentences) at `--sequence-length 128`, batch 32, XLA, AdamW: the training stream of
`kbz finetune` (`training.batching.training_stream`) with bucketing (16/32/64/128) and
without (`--no-bucketing`, every batch 128 tokens), then the validation/prediction pass on the
held-out sample (`examples/data/sst2_heldout.tsv`, 800 sentences) both ways. Weights are
random (the preset's architecture): speed does not depend on them. Every shape is compiled
in a warm-up pass first; then the two modes are timed in alternating rounds, so a busy
shared machine slows both alike, and the best round counts.
"""

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.tasks.models import FINETUNING_TASKS  # noqa: E402
from keras_bert_zoo.training import batching, bucketed_prediction, create_optimizer  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "examples" / "data"


def _arrays(job, name):
    dataset = job.read(DATA / name)
    x, y, _ = job.arrays(dataset)
    return dataset, x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert_tiny_en_uncased")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30, help="timed training steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    preprocessor = kbz.BertPreprocessor.from_preset(
        args.preset, sequence_length=args.sequence_length
    )
    job = FINETUNING_TASKS["classifier"](preprocessor)
    train, x, y = _arrays(job, "sst2_sample.tsv")
    _, x_val, _ = _arrays(job, "sst2_heldout.tsv")
    lengths = batching.real_lengths(x)
    print(
        f"{args.preset}, {len(lengths)} train sentences: real length mean {lengths.mean():.1f}, "
        f"max {lengths.max()} of {args.sequence_length}"
    )
    keras.utils.set_random_seed(0)
    model = kbz.from_preset(args.preset, task="classifier", load_weights=False, num_classes=2)
    model.compile(optimizer=create_optimizer(2e-5, 10_000), loss=job.loss(train), jit_compile=True)
    modes = {}
    for name, bucketing in (("bucketed", True), ("fixed", False)):
        buckets = batching.bucket_lengths(args.sequence_length, bucketing)
        schedule = batching.BatchSchedule(lengths, args.batch_size, buckets, seed=0)
        stream = batching.training_stream(x, y, schedule, sequence_targets=False)
        modes[name] = (buckets, schedule, stream)
        used = sorted(set(schedule.epoch(0)[1].tolist()))
        print(f"{name}: {schedule.steps_per_epoch} steps per epoch, batch lengths {used}")
        start = time.perf_counter()  # warm-up: one epoch compiles every shape
        model.fit(
            stream(0), steps_per_epoch=schedule.steps_per_epoch, epochs=1, verbose=0, shuffle=False
        )
        bucketed_prediction.predict(model, x_val, args.batch_size, buckets, sequence_outputs=False)
        print(
            f"  warm-up (compilation + 1 epoch + 1 prediction) {time.perf_counter() - start:.0f}s"
        )
    results = {name: {"train": [], "predict": []} for name in modes}
    for round_ in range(args.rounds):
        for name, (buckets, schedule, stream) in modes.items():
            begin = schedule.steps_per_epoch + round_ * args.steps
            start = time.perf_counter()
            model.fit(stream(begin), steps_per_epoch=args.steps, epochs=1, verbose=0, shuffle=False)
            results[name]["train"].append(args.steps / (time.perf_counter() - start))
            start = time.perf_counter()
            bucketed_prediction.predict(
                model, x_val, args.batch_size, buckets, sequence_outputs=False
            )
            results[name]["predict"].append(len(x_val["token_ids"]) / (time.perf_counter() - start))
        print(
            f"round {round_ + 1}: "
            + ", ".join(
                f"{n} {r['train'][-1]:.2f} steps/s, {r['predict'][-1]:.0f} predicted seq/s"
                for n, r in results.items()
            )
        )
    best = {n: {k: max(v) for k, v in r.items()} for n, r in results.items()}
    train = best["bucketed"]["train"], best["fixed"]["train"]
    epoch = [modes[n][1].steps_per_epoch / best[n]["train"] for n in ("bucketed", "fixed")]
    predict = best["bucketed"]["predict"], best["fixed"]["predict"]
    print(
        f"best of {args.rounds}: train {train[0]:.2f} vs {train[1]:.2f} steps/s "
        f"(x{train[0] / train[1]:.2f}); epoch {epoch[0]:.0f}s vs {epoch[1]:.0f}s "
        f"(x{epoch[1] / epoch[0]:.2f}); predict {predict[0]:.0f} vs {predict[1]:.0f} seq/s "
        f"(x{predict[0] / predict[1]:.2f})"
    )


if __name__ == "__main__":
    main()
