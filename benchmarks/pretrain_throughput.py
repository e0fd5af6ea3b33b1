"""BERT pretraining (MLM + NSP) throughput and MFU, trained as `kbz pretrain` trains.

    python benchmarks/pretrain_throughput.py        # bert_base, seq 128, mixed_bfloat16, XLA
    python benchmarks/pretrain_throughput.py --preset bert_tiny_en_uncased \
        --precision float32 --batch-size 32 --steps 10          # a quick check on a CPU

The pretrainer of `--preset` (random weights) is compiled with XLA, BERT's AdamW schedule and
`steps_per_execution`, and fed synthetic batches (random ids, `--max-predictions` masked
positions, random NSP labels) from a repeated `tf.data` dataset, so the input pipeline costs
nothing. The first epoch compiles and warms up; then `--epochs` epochs of `--steps` steps are
timed and the fastest counts. FLOPs per sequence (train = 3 x forward):
6 x (encoder matmul parameters x sequence length + MLM head matmul parameters x predictions)
+ 12 x layers x hidden x sequence length^2 (attention scores and context). MFU is against
`--peak-tflops`, else the chip's dense bf16/fp16 peak from NVIDIA's data sheets for known
GPUs, else (CPU) the float32 matmul peak measured in this run.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import throughput  # noqa: E402
from accelerator_common import pretraining_batch  # noqa: E402
from flops import gpu_peak_tflops, pretraining_flops  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.presets import load_preset_config  # noqa: E402
from keras_bert_zoo.pretraining import compile_pretrainer  # noqa: E402
from keras_bert_zoo.training import create_optimizer, set_precision  # noqa: E402


def peak_flops(override_tflops):
    if override_tflops:
        return override_tflops * 1e12, f"--peak-tflops {override_tflops}"
    for gpu in tf.config.list_physical_devices("GPU"):
        name = tf.config.experimental.get_device_details(gpu).get("device_name", "")
        tflops = gpu_peak_tflops(name)
        if tflops:
            return tflops * 1e12, f"{name}: dense bf16 data-sheet peak"
        raise SystemExit(f"No peak known for {name!r}: pass --peak-tflops.")
    return throughput.matmul_peak(), "float32 matmul peak measured on this CPU"


def synthetic_batches(batch, length, predictions, vocabulary, seed=0):
    x, y, weights = pretraining_batch(batch, length, predictions, vocabulary, seed)
    return tf.data.Dataset.from_tensors((x, y, weights)).repeat()


class EpochTimer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert_base_en_uncased")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--max-predictions", type=int, default=20)
    parser.add_argument(
        "--precision",
        default="mixed_bfloat16",
        choices=["float32", "mixed_bfloat16", "mixed_float16"],
    )
    parser.add_argument("--steps", type=int, default=50, help="steps per timed epoch")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs (after warm-up)")
    parser.add_argument("--steps-per-execution", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args()
    if args.steps % args.steps_per_execution:
        raise SystemExit("--steps must be a multiple of --steps-per-execution")
    architecture = load_preset_config(args.preset).architecture
    peak, peak_source = peak_flops(args.peak_tflops)
    set_precision(args.precision)
    keras.utils.set_random_seed(0)
    model = kbz.from_preset(
        args.preset, task="pretrainer", load_weights=False, max_predictions=args.max_predictions
    )
    optimizer = create_optimizer(
        1e-4, total_steps=10**6, loss_scale=args.precision == "mixed_float16"
    )
    compile_pretrainer(
        model, optimizer, jit_compile=True, steps_per_execution=args.steps_per_execution
    )
    data = synthetic_batches(
        args.batch_size, args.sequence_length, args.max_predictions, architecture["vocabulary_size"]
    )
    timer = EpochTimer()
    history = model.fit(
        data,
        steps_per_epoch=args.steps,
        epochs=1 + args.epochs,
        verbose=0,
        shuffle=False,
        callbacks=[timer],
    )
    best = min(timer.seconds[1:]) / args.steps
    flops = pretraining_flops(architecture, args.sequence_length, args.max_predictions)
    result = {
        "preset": args.preset,
        "precision": args.precision,
        "batch_size": args.batch_size,
        "sequence_length": args.sequence_length,
        "max_predictions": args.max_predictions,
        "devices": [device.name for device in tf.config.list_physical_devices()],
        "seconds_per_step": best,
        "sequences_per_second": args.batch_size / best,
        "train_tflops_per_second": flops * args.batch_size / best / 1e12,
        "peak_tflops": peak / 1e12,
        "peak_source": peak_source,
        "mfu": flops * args.batch_size / best / peak,
        "final_loss": float(history.history["loss"][-1]),
    }
    print(json.dumps(result, indent=2))
    if not np.isfinite(result["final_loss"]):
        raise SystemExit("the loss is not finite: the timing is of a broken run")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
