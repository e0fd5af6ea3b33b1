"""JAX's train step beside TensorFlow's, through `model.fit` as users train (issue 27 item 2).

    python benchmarks/jax_train_step.py                     # bert_small, seq 128, batch 32
    python benchmarks/jax_train_step.py --repeats 3 --steps 5 --rounds 3
    KERAS_BACKEND=jax python benchmarks/jax_train_step.py --masks   # one dropout mask alone

A bert_small classifier (4 layers, hidden 512; random weights), sequence 128, batch 32, XLA
(`jit_compile=True`), `kbz.training.create_optimizer` (AdamW, decay exclusions, global-norm
clip), fed the same numpy batch through `fit`. Each backend runs in its own process, the
processes alternate (`--repeats`), and the best epoch of each counts, because a shared machine
drifts. Inside a process the variants are compiled once each, then timed in interleaved rounds
of one epoch of `--steps` steps:

- `ours`: the package as it is, in a process set up as `kbz`'s (`kbz.tune_process()`);
- `keras dropout` (JAX): the mask of `keras.layers.Dropout` (`jax.random.bernoulli`), which
  `kbz.layers.Dropout` replaced on JAX with XLA's Threefry (`jax.lax.rng_bit_generator`);
- `no dropout`: dropout 0 everywhere, the step's cost without any mask;
- `keras AdamW`: `keras.optimizers.AdamW` with the same schedule, decay and clip instead of
  our `AdamW.update_step` (epsilon placement), to see what our update costs.
"""

import argparse
import json
import os
import subprocess
import sys
import time

VARIANTS = {
    "jax": ["ours", "keras dropout", "no dropout", "keras AdamW"],
    "tensorflow": ["ours", "no dropout"],
}


def bert_small_classifier(dropout: float = 0.1, optimizer=None):
    """The benchmarked model: bert_small (4 layers, hidden 512; random weights, seed 0) with
    a 2-class head, compiled with XLA and `create_optimizer` (or `optimizer`)."""
    import keras

    import keras_bert_zoo as kbz
    from keras_bert_zoo.training import create_optimizer

    keras.utils.set_random_seed(0)
    encoder = kbz.build_encoder(30522, 4, 8, 512, 2048, dropout=dropout)
    model = kbz.build_classifier(encoder, 2, dropout=dropout)
    optimizer = optimizer or create_optimizer(2e-5, total_steps=10**6)
    model.compile(optimizer, kbz.tasks.classifier_loss(2), jit_compile=True)
    return model


def classifier_batch(batch: int, length: int):
    """`(x, y)`: one batch of random ids, every token real, and alternating labels."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(1000, 30522, (batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }
    return x, (np.arange(batch) % 2).astype("int32")


def fit_seconds(model, x, y, steps: int) -> float:
    """Seconds for one `fit` epoch of `steps` steps on the batch `(x, y)`, device work done."""
    import keras

    def repeated():
        while True:
            yield x, y

    start = time.perf_counter()
    model.fit(repeated(), steps_per_epoch=steps, epochs=1, verbose=0)
    keras.ops.convert_to_numpy(model.trainable_variables[0])  # waits for the device
    return time.perf_counter() - start


def child(args) -> None:
    import keras_bert_zoo as kbz

    kbz.tune_process()  # the process settings `kbz` runs with, before Keras loads its backend
    import keras

    from keras_bert_zoo.training import WarmupLinearDecay, optimizers

    def model_for(variant):
        dropout = 0.0 if variant == "no dropout" else 0.1
        if variant != "keras AdamW":
            return bert_small_classifier(dropout)
        optimizer = keras.optimizers.AdamW(
            WarmupLinearDecay(2e-5, 10**5, 10**6),
            weight_decay=0.01,
            epsilon=1e-6,
            global_clipnorm=1.0,
        )
        optimizer.exclude_from_weight_decay(var_names=optimizers.NO_DECAY)
        return bert_small_classifier(dropout, optimizer)

    batch = args.batch_size
    x, y = classifier_batch(batch, args.sequence_length)

    def epoch(model, steps):
        return fit_seconds(model, x, y, steps)

    backend = keras.backend.backend()
    models = {}
    for variant in VARIANTS[backend]:
        if args.variants and variant not in args.variants.split(","):
            continue
        models[variant] = model_for(variant)
        original = kbz.layers.Dropout.call
        if variant == "keras dropout":  # traced (and compiled) with Keras' own mask
            kbz.layers.Dropout.call = keras.layers.Dropout.call
        try:
            epoch(models[variant], 2)
        finally:
            kbz.layers.Dropout.call = original
    best = dict.fromkeys(models, float("inf"))
    for _ in range(args.rounds):
        for variant, model in models.items():
            best[variant] = min(best[variant], epoch(model, args.steps) / args.steps)
    for variant, seconds in best.items():
        row = {"backend": backend, "variant": variant, "seq_s": batch / seconds}
        print("ROW " + json.dumps(row), flush=True)


def mask_timings(rounds: int) -> None:
    """ms for one attention-probability mask of bert_small ([32, 8, 128, 128], rate 0.1)."""
    import jax
    import keras

    from keras_bert_zoo.layers import Dropout

    x = jax.numpy.ones((32, 8, 128, 128))
    keras_layer, ours = keras.layers.Dropout(0.1, seed=1), Dropout(0.1, seed=1)
    steps = {}
    for name, layer in (("jax.random.bernoulli (Keras)", keras_layer), ("ours", ours)):
        state = [v.value for v in layer.non_trainable_variables]
        steps[name] = (
            jax.jit(lambda s, x, layer=layer: layer.stateless_call([], s, x, training=True)),
            state,
        )
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(rounds):
        for name, (step, state) in steps.items():
            jax.block_until_ready(step(state, x))  # compiled in the first round
            start = time.perf_counter()
            for _ in range(5):
                out, state = step(state, x)
            jax.block_until_ready(out)
            best[name] = min(best[name], (time.perf_counter() - start) / 5)
    for name, seconds in best.items():
        print(f"{name}: {1000 * seconds:.1f} ms per mask")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="tensorflow,jax")
    parser.add_argument("--repeats", type=int, default=2, help="processes per backend")
    parser.add_argument("--rounds", type=int, default=3, help="timed epochs per variant")
    parser.add_argument("--steps", type=int, default=5, help="steps per timed epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--variants", default=None, help="only these (comma-separated)")
    parser.add_argument("--masks", action="store_true", help="time one dropout mask (JAX)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.masks:
        return mask_timings(args.rounds)
    if args.child:
        return child(args)
    best, every = {}, []
    for _ in range(args.repeats):
        for backend in args.backends.split(","):
            env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
            out = subprocess.run(
                [sys.executable, __file__, "--child", *sys.argv[1:]],
                env=env,
                capture_output=True,
                text=True,
            )
            rows = [json.loads(line[4:]) for line in out.stdout.splitlines() if line[:4] == "ROW "]
            if not rows:
                raise SystemExit(out.stderr[-3000:])
            for row in rows:
                key = (row["backend"], row["variant"])
                best[key] = max(best.get(key, 0.0), row["seq_s"])
                every.append(row)
                print(json.dumps(row), flush=True)
    baseline = best.get(("tensorflow", "ours"))
    print("\n| backend | variant | train seq/s (best) | / TensorFlow ours |\n|---|---|---|---|")
    for (backend, variant), speed in best.items():
        ratio = f"{speed / baseline:.2f}x" if baseline else "-"
        print(f"| {backend} | {variant} | {speed:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
