"""Fused attention on and off: forward and train-step throughput, in one process per backend.

    python benchmarks/fused_attention.py --shape small                 # TensorFlow
    KERAS_BACKEND=jax python benchmarks/fused_attention.py --shape small
    KERAS_BACKEND=torch python benchmarks/fused_attention.py --shape small

Two classifiers with the same weights, one forced to fused attention
(`keras.ops.dot_product_attention`) and one to the explicit softmax
(`kbz.encoder.set_attention` "fused" and "explicit"; by default, "auto", a model takes the
fused op where the backend has a fused kernel, `kbz.layers.attention.fused_kernel`).
Both have attention dropout 0 (hidden dropout 0.1), so the train step runs fused too. Forward is
`predict_on_batch`, train is `train_on_batch` with AdamW; XLA (`jit_compile=True`) on
TensorFlow and JAX, eager on PyTorch. Rounds interleave the two models and the best round of
each counts, because a shared machine drifts; the ratio is fused over explicit throughput.
Imports no TensorFlow unless Keras runs on it.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402

SHAPES = {  # layers, hidden, heads (as benchmarks/throughput.py, which imports TensorFlow)
    "tiny": (2, 128, 2),
    "small": (4, 512, 8),
    "minilm": (6, 384, 12),
    "base": (12, 768, 12),
}
VOCABULARY = 30522


def classifiers(shape: str):
    """`{"fused": model, "explicit": model}`: the same weights, attention dropout 0."""
    layers, hidden, heads = SHAPES[shape]
    keras.utils.set_random_seed(0)
    models = {}
    for name in ("fused", "explicit"):
        encoder = kbz.build_encoder(
            VOCABULARY, layers, heads, hidden, 4 * hidden, attention_dropout=0.0
        )
        kbz.encoder.set_attention(encoder, name)
        models[name] = kbz.build_classifier(encoder, num_classes=2)
    models["explicit"].set_weights(models["fused"].get_weights())
    for model in models.values():
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-4),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=keras.backend.backend() != "torch",
        )
    return models


def seconds_per_step(step, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        result = step()
    keras.ops.convert_to_numpy(keras.tree.flatten(result)[0])  # wait for asynchronous work
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="small", choices=sorted(SHAPES))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batch, length = args.batch_size, args.sequence_length
    x = {
        "token_ids": rng.integers(1000, VOCABULARY, (batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }
    x["padding_mask"][: batch // 2, length * 3 // 4 :] = 0  # half the rows padded by a quarter
    x["token_ids"] *= x["padding_mask"]
    labels = np.zeros(batch, "int32")
    models = classifiers(args.shape)
    steps = {
        (mode, name): (
            (lambda m=model: m.predict_on_batch(x))
            if mode == "forward"
            else (lambda m=model: m.train_on_batch(x, labels))
        )
        for mode in ("forward", "train")
        for name, model in models.items()
    }
    for step in steps.values():  # compile (XLA) and warm up
        step()
        step()
    times = {key: [] for key in steps}
    for round_index in range(args.rounds):
        for key, step in steps.items():
            times[key].append(seconds_per_step(step, args.steps))
            print(
                f"round {round_index} {key[0]:7s} {key[1]:8s} {batch / times[key][-1]:8.2f} seq/s"
            )
    print(
        f"\n{keras.backend.backend()} {keras.__version__}, {args.shape}, batch {batch}, "
        f"sequence {length}, best of {args.rounds} rounds of {args.steps} steps"
    )
    print("| pass | fused seq/s | explicit seq/s | fused / explicit |\n|---|---|---|---|")
    for mode in ("forward", "train"):
        fused, explicit = (batch / min(times[mode, name]) for name in ("fused", "explicit"))
        print(f"| {mode} | {fused:.1f} | {explicit:.1f} | x{fused / explicit:.2f} |")


if __name__ == "__main__":
    main()
