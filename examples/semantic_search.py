"""Semantic search over SQuAD v1.1 paragraphs with a sentence embedder (all-MiniLM-L6-v2).

Every paragraph is embedded once (the index); each question is a query, and its target is
the paragraph it was asked about. Prints recall@1 / recall@5 (share of questions whose
paragraph ranks first / in the top 5 by cosine similarity) and MRR, then answers a few
queries.

    python examples/semantic_search.py                       # 6 bundled articles
    python examples/semantic_search.py --fast                # 2 held-out articles
    python examples/semantic_search.py --squad /path/to/squad-v1.1-articles-00-31.json
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _common import DATA, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402


def squad_retrieval(path):
    """`(paragraphs, questions, target paragraph index of each question)` of a SQuAD file."""
    paragraphs, questions, targets = [], [], []
    for article in json.loads(open(path, encoding="utf-8").read())["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                questions.append(qa["question"])
                targets.append(len(paragraphs))
            paragraphs.append(paragraph["context"])
    return paragraphs, questions, targets


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default=None, help="default: MiniLM, converted on first use")
    parser.add_argument("--output", default="example_output")
    parser.add_argument("--fast", action="store_true", help="the 2 held-out bundled articles")
    parser.add_argument("--squad", default=None, help="a SQuAD v1.1 JSON file to search")
    parser.add_argument(
        "--sequence-length",
        type=int,
        default=None,
        help="paragraph tokens (default: MiniLM's 256; 128 with --fast)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    return parser.parse_args()


def main():
    args = parse_args()
    default = "squad_heldout_sample.json" if args.fast else "squad_train_sample.json"
    paragraphs, questions, targets = squad_retrieval(args.squad or DATA / default)
    preset = real_preset(args.preset, args.output)
    embedder = kbz.from_preset(preset, task="embedder")  # the preset's pooling (mean, L2)
    length = args.sequence_length or (128 if args.fast else 256)
    for_paragraphs = kbz.BertPreprocessor.from_preset(preset, sequence_length=length)
    for_questions = kbz.BertPreprocessor.from_preset(preset, sequence_length=64)
    start = time.perf_counter()
    index = kbz.jobs.embed_texts(embedder, for_paragraphs, paragraphs, args.batch_size)
    queries = kbz.jobs.embed_texts(embedder, for_questions, questions, args.batch_size)
    seconds = time.perf_counter() - start
    scores = kbz.jobs.recall_at_k(queries, index, targets)
    print(
        f"{len(paragraphs)} paragraphs, {len(questions)} questions "
        f"(embedded in {seconds:.1f} s; by chance, top-1 hits {1 / len(paragraphs):.4f})"
    )
    print("recall@1 {recall@1:.4f}, recall@5 {recall@5:.4f}, MRR {mrr:.4f}".format(**scores))
    for i in (0, len(questions) // 2):
        best = int((index @ queries[i]).argmax())
        verdict = "right" if best == targets[i] else "wrong"
        print(f"Q: {questions[i]}\n  -> ({verdict}) {paragraphs[best][:150]}...")


if __name__ == "__main__":
    main()
