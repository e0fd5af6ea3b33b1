"""SQuAD v1.1 JSON to `query<TAB>positive` pairs (question, its paragraph) for
`kbz finetune embed`; `--exclude` leaves out the articles of another SQuAD file (held-out
evaluation on articles never trained on).

    python tools/squad_pairs.py examples/data/squad_train_sample.json train_pairs.tsv
    python tools/squad_pairs.py squad-v1.1-articles-00-31.json heldout_pairs.tsv \
        --exclude examples/data/squad_train_sample.json
"""

import argparse
import json
from pathlib import Path


def _one_line(text: str) -> str:
    return " ".join(text.split())  # tabs and newlines would break the TSV


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="SQuAD v1.1 JSON file")
    parser.add_argument("destination", help="pairs TSV to write")
    parser.add_argument("--exclude", help="SQuAD JSON whose article titles are left out")
    args = parser.parse_args()
    excluded = set()
    if args.exclude:
        excluded = {a["title"] for a in json.loads(Path(args.exclude).read_text())["data"]}
    rows, articles = ["query\tpositive"], 0
    for article in json.loads(Path(args.source).read_text(encoding="utf-8"))["data"]:
        if article["title"] in excluded:
            continue
        articles += 1
        for paragraph in article["paragraphs"]:
            context = _one_line(paragraph["context"])
            rows += [f"{_one_line(qa['question'])}\t{context}" for qa in paragraph["qas"]]
    Path(args.destination).write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(f"Wrote {len(rows) - 1} pairs of {articles} articles to {args.destination}")


if __name__ == "__main__":
    main()
