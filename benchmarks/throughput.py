"""Training-step and forward throughput: keras-bert-zoo vs keras-hub vs Hugging Face torch.

    python benchmarks/throughput.py                      # tiny, small, base at seq 128
    python benchmarks/throughput.py --shapes small --batch-size 32 --steps 10
    KERAS_BACKEND=jax python benchmarks/throughput.py --peers none   # the Keras models on JAX

Every model is an encoder + a 2-class head on the pooled output, fed the same random ids.
Keras models are compiled with XLA (`jit_compile=True`); torch runs eager and, when it
works on this machine, `torch.compile`. Model FLOP utilisation (MFU) is the train step's
achieved FLOP/s over the float32 matmul peak measured in the same run on the same device
(the best of its measurements). Implementations are timed in interleaved rounds and the
best round of each counts (`--rounds`), because this shared machine drifts by 10-20%.
FLOPs per sequence (train) ~ 6 x non-embedding params x tokens + 12 x layers x hidden x
tokens^2 (attention scores and context), forward = a third of that.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402

SHAPES = {
    "tiny": (2, 128, 2),
    "small": (4, 512, 8),
    "minilm": (6, 384, 12),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
}
VOCABULARY = 30522


def train_flops(layers, hidden, tokens):
    non_embedding = layers * (12 * hidden * hidden + 13 * hidden) + hidden * hidden
    return 6 * non_embedding * tokens + 12 * layers * hidden * tokens * tokens


def matmul_peak(size=2048, repeats=20, jit_compile=True):
    a = tf.random.normal([size, size])
    matmul = tf.function(lambda x: tf.linalg.matmul(x, x), jit_compile=jit_compile)
    matmul(a).numpy()
    start = time.perf_counter()
    for _ in range(repeats):
        result = matmul(a)
    result.numpy()
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def warmed_up(*steps):
    """Calls each step function twice (XLA and torch.compile compile on the first call)."""
    for step in steps:
        step()
        step()
    return steps


def timed(fn, steps):
    warmed_up(fn)
    return seconds_per_step(fn, steps)


def seconds_per_step(fn, steps):
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def inputs(batch, length, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(1000, VOCABULARY, (batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }


def keras_steps(model, x, labels):
    """(forward, train) step functions of a Keras model compiled with XLA."""
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    return (lambda: model.predict_on_batch(x)), (lambda: model.train_on_batch(x, labels))


def ours(layers, hidden, heads, length):
    encoder = kbz.build_encoder(
        VOCABULARY, layers, heads, hidden, 4 * hidden, max_sequence_length=max(512, length)
    )
    return kbz.build_classifier(encoder, num_classes=2)


def keras_hub_model(layers, hidden, heads, length):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=4 * hidden,
        max_sequence_length=max(512, length),
    )
    head = keras.layers.Dense(2)(keras.layers.Dropout(0.1)(backbone.output["pooled_output"]))
    return keras.Model(backbone.input, head)


def torch_steps(layers, hidden, heads, x, compiled):
    """(forward, train) step functions of transformers' torch BERT, eager or compiled."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCABULARY,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
    )
    model = transformers.BertForSequenceClassification(config)
    ids = {
        "input_ids": torch.from_numpy(x["token_ids"]).long(),
        "token_type_ids": torch.from_numpy(x["segment_ids"]).long(),
        "attention_mask": torch.from_numpy(x["padding_mask"]).long(),
    }
    labels = torch.zeros(len(x["token_ids"]), dtype=torch.long)
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
    run = torch.compile(model) if compiled else model

    def forward():
        model.eval()
        with torch.no_grad():
            run(**ids).logits.sum().item()

    def train():
        model.train()
        optimizer.zero_grad()
        run(**ids, labels=labels).loss.backward()
        optimizer.step()

    return forward, train


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="tiny,small,base")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; best counts")
    parser.add_argument("--peers", default="keras_hub,torch,torch_compile")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args()
    peak = matmul_peak()
    print(f"float32 matmul peak (2048^3, XLA): {peak / 1e9:.1f} GFLOP/s on this device")
    print(f"Keras backend: {keras.backend.backend()} (set KERAS_BACKEND to compare)")
    rows, peers = [], args.peers.split(",")
    for shape in args.shapes.split(","):
        layers, hidden, heads = SHAPES[shape]
        batch, length = args.batch_size, args.sequence_length
        x, labels = inputs(batch, length), np.zeros(batch, "int32")
        steps = {"ours": warmed_up(*keras_steps(ours(layers, hidden, heads, length), x, labels))}
        if "keras_hub" in peers:
            steps["keras_hub"] = warmed_up(
                *keras_steps(keras_hub_model(layers, hidden, heads, length), x, labels)
            )
        for name in ("torch", "torch_compile"):
            if name in peers:
                try:
                    steps[name] = warmed_up(
                        *torch_steps(layers, hidden, heads, x, compiled=name == "torch_compile")
                    )
                except Exception as error:  # noqa: BLE001 (a peer missing here is reported)
                    print(f"   {name} skipped: {type(error).__name__}: {str(error)[:120]}")
        # Rounds interleave the implementations and the best round counts, so a shared
        # machine that slows down for a while slows every implementation alike.
        results = {name: [float("inf"), float("inf")] for name in steps}
        for _ in range(args.rounds):
            for name, pair in steps.items():
                for i, step in enumerate(pair):
                    results[name][i] = min(results[name][i], seconds_per_step(step, args.steps))
        peak = max(peak, matmul_peak())
        flops = train_flops(layers, hidden, length) * batch
        for name, (forward, train) in results.items():
            row = {
                "backend": keras.backend.backend(),
                "shape": shape,
                "impl": name,
                "forward_seq_s": batch / forward,
                "train_seq_s": batch / train,
                "train_mfu": flops / train / peak,
            }
            rows.append(row)
            print(
                f"{shape:6s} {name:14s} forward {row['forward_seq_s']:8.1f} seq/s   train "
                f"{row['train_seq_s']:7.1f} seq/s   MFU {100 * row['train_mfu']:5.1f}%",
                flush=True,
            )
        base = results["ours"]
        for name, (forward, train) in results.items():
            if name != "ours":
                print(
                    f"{shape:6s} ours / {name:14s} forward x{forward / base[0]:.2f}   "
                    f"train x{train / base[1]:.2f}"
                )
        keras.backend.clear_session()
    print(f"float32 matmul peak, best of the run: {peak / 1e9:.1f} GFLOP/s (MFU is against it)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"peak_flops": peak, "rows": rows, "args": vars(args)}, handle, indent=2)


if __name__ == "__main__":
    main()
