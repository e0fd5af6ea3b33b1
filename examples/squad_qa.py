"""Extractive question answering on SQuAD v1.1 in a Keras script: questions, contexts and
answers in (long contexts cut into doc-stride windows), answer texts out, the official
exact-match / F1.

    python examples/squad_qa.py              # 6 training articles, 2 held-out articles
    python examples/squad_qa.py --fast

Runs on TensorFlow, JAX or PyTorch (`KERAS_BACKEND`).
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _common import DATA, parse_args, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402


def read(path, count=None):
    """SQuAD JSON as the task model takes it: x = questions and contexts, y = every gold
    answer of each (training uses the first, evaluation all, as SQuAD's script)."""
    rows = [
        (qa["question"], paragraph["context"], qa["answers"])
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ][:count]
    x = {"question": [r[0] for r in rows], "context": [r[1] for r in rows]}
    y = {
        "text": [[a["text"] for a in r[2]] for r in rows],
        "answer_start": [[a["answer_start"] for a in r[2]] for r in rows],
    }
    return x, y


def main():
    args = parse_args(__doc__)
    preset = real_preset(args.preset, args.output)
    x, y = read(DATA / "squad_train_sample.json", 48 if args.fast else None)
    x_held, y_held = read(DATA / "squad_heldout_sample.json", 16 if args.fast else None)

    qa = kbz.BertQuestionAnswerer.from_preset(
        preset, sequence_length=128 if args.fast else 256, doc_stride=64
    )
    qa.fit(x=x, y=y, epochs=1 if args.fast else 2, seed=args.seed)
    scores = qa.evaluate(x_held, y_held)
    print("held-out exact match {exact_match:.1f}, F1 {f1:.1f}".format(**scores))
    print(x_held["question"][0], "->", qa.answer(x_held["question"][:1], x_held["context"][:1]))


if __name__ == "__main__":
    main()
