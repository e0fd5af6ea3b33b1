"""Where the train step's time goes: A/B timings of variants of our model, in one process.

    python benchmarks/train_step_variants.py --shape small          # train step
    python benchmarks/train_step_variants.py --shape tiny --forward # predict_on_batch
    python benchmarks/train_step_variants.py --shape minilm --sequence-length 32 \
        --variants "ours (XLA),full last block"
    XLA_FLAGS=--xla_cpu_use_onednn=true python benchmarks/train_step_variants.py

Each variant changes one thing of the encoder + 2-class head of `throughput.py` (XLA,
AdamW) and is timed in rounds interleaved with the others, so a busy shared machine slows
them alike; the best round counts. Variants that change behaviour (no input checks, no
dropout) are measurements of a cost, not candidates; "Keras dropout" is the Philox mask of
`keras.layers.Dropout` that our Threefry `Dropout` replaces under XLA. XLA flags are read once
per process: compare them by running the script once per `XLA_FLAGS` value.
"""

import argparse
import contextlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import throughput  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.layers import dropout, input_checks  # noqa: E402


@contextlib.contextmanager
def patched(owner, name, value):
    """Replaces `owner.name` while models are built and traced inside the block."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="small", choices=sorted(throughput.SHAPES))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--forward", action="store_true", help="time predict_on_batch")
    parser.add_argument("--variants", default=None, help="comma-separated subset")
    args = parser.parse_args()
    layers, hidden, heads = throughput.SHAPES[args.shape]
    x = throughput.inputs(args.batch_size, args.sequence_length)
    labels = np.zeros(args.batch_size, "int32")

    def ours(dropout=0.1, full_last_block=False):
        encoder = kbz.build_encoder(
            throughput.VOCABULARY,
            layers,
            heads,
            hidden,
            4 * hidden,
            max_sequence_length=512,
            dropout=dropout,
        )
        if full_last_block:  # the classifier before it computed the last block at [CLS] only
            head = keras.layers.Dense(2, name="classifier_head")
            pooled = kbz.layers.Dropout(0.1)(encoder.output["pooled_output"])
            return kbz.BertModel(encoder.input, head(pooled))
        return kbz.build_classifier(encoder, num_classes=2)

    def seconds(model, jit_compile=True):
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-4),
            jit_compile=jit_compile,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        step = (
            (lambda: model.predict_on_batch(x))
            if args.forward
            else (lambda: model.train_on_batch(x, labels))
        )
        return throughput.timed(step, args.steps)

    def with_patch(owner, name, value):
        with patched(owner, name, value):
            return seconds(ours())

    variants = {
        "ours (XLA)": lambda: seconds(ours()),
        "ours without XLA": lambda: seconds(ours(), jit_compile=False),
        "no input checks": lambda: with_patch(
            input_checks.InputChecks, "call", lambda self, inputs: inputs
        ),
        "Keras dropout": lambda: with_patch(dropout, "in_xla_trace", lambda: False),
        "no dropout": lambda: seconds(ours(dropout=0.0)),
        "full last block": lambda: seconds(ours(full_last_block=True)),
        "keras-hub (XLA)": lambda: seconds(throughput.keras_hub_model(layers, hidden, heads, 128)),
    }
    names = args.variants.split(",") if args.variants else list(variants)
    times = {name: [] for name in names}
    for round_index in range(args.rounds):
        for name in names:
            times[name].append(variants[name]())
            keras.backend.clear_session()
            print(
                f"round {round_index}  {name:18s} {args.batch_size / times[name][-1]:8.2f} seq/s",
                flush=True,
            )
    graph_peak = throughput.matmul_peak(jit_compile=False)
    print(
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}  {args.shape}  batch "
        f"{args.batch_size}  {'forward' if args.forward else 'train step'}"
    )
    print(
        f"float32 matmul 2048^3: XLA {throughput.matmul_peak() / 1e9:.1f} GFLOP/s, "
        f"TensorFlow without XLA {graph_peak / 1e9:.1f} GFLOP/s"
    )
    reference = min(times[names[0]])
    for name in names:
        best = min(times[name])
        print(
            f"{name:18s} {args.batch_size / best:8.2f} seq/s   x{reference / best:.3f} "
            f"vs {names[0]}"
        )


if __name__ == "__main__":
    main()
