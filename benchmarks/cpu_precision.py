"""Can bfloat16 buy speed on this CPU? Matmul peaks and MiniLM train steps by precision.

    python benchmarks/cpu_precision.py                     # MiniLM shape, batch 16, 32/64/128
    python benchmarks/cpu_precision.py --lengths 64 --rounds 5

The CPU of this VM has AMX (bfloat16 tiles). This measures, in one process:
- the matmul throughput of one BERT feed-forward product (512 x 384 @ 384 x 1536) in float32
  and bfloat16, through TensorFlow graph mode (oneDNN) and through XLA;
- the train step of the MiniLM shape (6 layers, 384 wide, 12 heads, 2-class head, AdamW) as
  `kbz finetune` runs it (XLA, float32), with `mixed_bfloat16` under XLA and without it
  (graph mode: oneDNN matmuls), and Hugging Face transformers' eager PyTorch step in float32
  and under `torch.autocast(bfloat16)` (the `reference` extra).
Rounds interleave the variants and the best round of each counts (this VM drifts 10-20%).
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import throughput  # noqa: E402

LAYERS, HIDDEN, HEADS = 6, 384, 12  # all-MiniLM-L6-v2


def matmul_rates(repeats=200):
    """GFLOP/s of one feed-forward-sized product per (dtype, path)."""
    rates = {}
    for dtype in (tf.float32, tf.bfloat16):
        a = tf.cast(tf.random.normal([512, HIDDEN]), dtype)
        w = tf.cast(tf.random.normal([HIDDEN, 4 * HIDDEN]), dtype)
        for path, jit in (("graph", False), ("XLA", True)):
            product = tf.function(lambda a, w: tf.linalg.matmul(a, w), jit_compile=jit)
            product(a, w).numpy()
            start = time.perf_counter()
            for _ in range(repeats):
                result = product(a, w)
            result.numpy()
            seconds = (time.perf_counter() - start) / repeats
            rates[f"{dtype.name} {path}"] = 2 * 512 * HIDDEN * 4 * HIDDEN / seconds / 1e9
    return rates


def keras_step(policy, jit_compile, x, labels):
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = throughput.ours(LAYERS, HIDDEN, HEADS, x["token_ids"].shape[1])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return lambda: model.train_on_batch(x, labels)


def torch_step(x, bfloat16):
    import torch  # the `reference` extra
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=throughput.VOCABULARY,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=4 * HIDDEN,
    )
    model = transformers.BertForSequenceClassification(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
    ids = torch.from_numpy(x["token_ids"]).long()
    labels = torch.zeros(len(ids), dtype=torch.long)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--steps", type=int, default=5, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name, rate in matmul_rates().items():
        print(f"matmul 512x384 @ 384x1536, {name:15s} {rate:6.0f} GFLOP/s", flush=True)
    print(
        "| length | kbz XLA float32 | kbz XLA mixed_bfloat16 | kbz graph mixed_bfloat16 "
        "| HF eager float32 | HF eager autocast bfloat16 | HF float32 / kbz |"
    )
    print("|---|---|---|---|---|---|---|")
    for length in args.lengths:
        x = throughput.inputs(args.batch_size, length)
        labels = np.zeros(args.batch_size, "int32")
        steps = {
            "kbz XLA float32": keras_step("float32", True, x, labels),
            "kbz XLA mixed_bfloat16": keras_step("mixed_bfloat16", True, x, labels),
            "kbz graph mixed_bfloat16": keras_step("mixed_bfloat16", False, x, labels),
            "HF float32": torch_step(x, bfloat16=False),
            "HF bfloat16": torch_step(x, bfloat16=True),
        }
        throughput.warmed_up(*steps.values())
        best = dict.fromkeys(steps, float("inf"))
        for _ in range(args.rounds):
            for name, step in steps.items():
                best[name] = min(best[name], throughput.seconds_per_step(step, args.steps))
        cells = " | ".join(f"{1000 * s:.0f} ms" for s in best.values())
        ratio = best["HF float32"] / best["kbz XLA float32"]
        print(f"| {length} | {cells} | {ratio:.2f} |", flush=True)
        keras.backend.clear_session()


if __name__ == "__main__":
    main()
