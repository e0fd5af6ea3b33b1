"""Raw Python data to the readers' datasets: what the task models' `fit` / `evaluate` take.

The task models (`BertClassifier`, `BertTagger`, ...) accept texts as Python lists, tuples,
numpy arrays, pandas columns (anything with `tolist`), iterators, or a `tf.data.Dataset` of
strings, and turn them into the same dataclasses the file readers return
(`data.ClassificationData`, `data.TaggingData`, SQuAD examples, `PairsData`, `RankingData`),
so one engine (the task's `FinetuningTask`) trains and decodes both. Every problem is a
`ValueError` naming the argument (`x`, `y`, `x["question"]`), what was expected and the fix,
raised before any work.
"""

import itertools
import sys
from collections.abc import Iterable, Mapping

import keras
import numpy as np

from keras_bert_zoo.data.conll_reader import TaggedSentence, TaggingData, tag_vocabulary
from keras_bert_zoo.data.pairs_reader import PairsData
from keras_bert_zoo.data.readers import ClassificationData, TextExample, sorted_labels
from keras_bert_zoo.data.rerank_reader import RankingData, RankingPair
from keras_bert_zoo.data.squad_reader import SquadAnswer, SquadExample


def _is_dataset(value) -> bool:
    tf = sys.modules.get("tensorflow")  # a tf.data dataset implies TensorFlow is loaded
    return tf is not None and isinstance(value, tf.data.Dataset)


def _tokenized(value) -> bool:
    """Whether `value` (a dict, a dataset's element or a batch) is already model inputs."""
    if isinstance(value, tuple) and value:
        value = value[0]
    return isinstance(value, Mapping) and "token_ids" in value


def split_stream(x, y):
    """`(x, y, raw)`: an iterator or `tf.data.Dataset` of raw `(x, y)` elements or batches
    gathered into whole `x` and `y` lists; anything else as given. `raw` is False for
    pre-tokenized data (dicts of `token_ids`, ...), which Keras' own `fit` takes."""
    if isinstance(x, Mapping) or isinstance(x, keras.utils.PyDataset):
        return x, y, not _tokenized(x) and not isinstance(x, keras.utils.PyDataset)
    if _is_dataset(x):
        spec = x.element_spec
        if _tokenized(spec):
            return x, y, False
        x = x.as_numpy_iterator()
    elif x is None or isinstance(x, (list, tuple, str, bytes, np.ndarray)) or hasattr(x, "tolist"):
        return x, y, x is not None
    elif not hasattr(x, "__next__"):
        return x, y, True
    first = next(x, None)
    if first is None:
        return [], y, True
    if _tokenized(first):  # put back as a generator: Keras' adapters take no other iterator
        return (batch for batch in itertools.chain([first], x)), y, False
    if y is not None or not (isinstance(first, tuple) and len(first) == 2):
        return [first, *x], y, True
    xs, ys = [], []
    for element_x, element_y in itertools.chain([first], x):
        batched = isinstance(element_x, (list, np.ndarray)) and np.ndim(element_x) >= 1
        xs.extend(element_x if batched else [element_x])
        ys.extend(element_y if batched else [element_y])
    return xs, ys, True


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def column(value, name: str, kind: str = "strings") -> list:
    """`value` as a Python list (one entry per example), or an error naming `name`.

    Accepts a list or tuple, a 1-D numpy array, a pandas Series (`tolist`), an iterator
    or generator, or a `tf.data.Dataset` of scalars; bytes are decoded as UTF-8.
    """
    if isinstance(value, (str, bytes)):
        raise ValueError(
            f"`{name}` must be a list of {kind}, one per example. Received a single string: "
            f"{str(value)[:50]!r}. Wrap it in a list: [{str(value)[:20]!r}]."
        )
    if isinstance(value, Mapping) or value is None or not isinstance(value, Iterable):
        raise ValueError(
            f"`{name}` must be a list of {kind}, one per example (a list, numpy array, pandas "
            f"column or tf.data.Dataset). Received: {type(value).__name__}."
        )
    if _is_dataset(value):
        value = value.as_numpy_iterator()
    if hasattr(value, "tolist"):  # numpy arrays and pandas columns
        value = value.tolist()
    return [_text(v) for v in value]


def _check_strings(values: list, name: str) -> None:
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise ValueError(
                f"`{name}[{i}]` must be a string. Received: {type(value).__name__} "
                f"{str(value)[:50]!r}."
            )


def _check_same_length(first: list, second: list, names: tuple) -> None:
    if len(first) != len(second):
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must have one entry per example each. Received "
            f"{len(first)} and {len(second)}."
        )


def _check_not_empty(values: list, name: str) -> None:
    if not values:
        raise ValueError(f"`{name}` is empty: pass at least one example.")


def texts_or_pairs(x, name: str = "x") -> tuple[list, list | None]:
    """`x` as `(first texts, second texts or None)`: a list of strings, or a pair
    `(first, second)` of two such lists (sentence pairs)."""
    if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], (str, bytes)):
        first, second = column(x[0], f"{name}[0]"), column(x[1], f"{name}[1]")
        _check_same_length(first, second, (f"{name}[0]", f"{name}[1]"))
        _check_strings(first, f"{name}[0]")
        _check_strings(second, f"{name}[1]")
        _check_not_empty(first, name)
        return first, second
    first = column(x, name)
    _check_strings(first, name)
    _check_not_empty(first, name)
    return first, None


def classification_data(x, y, label_names, regression: bool) -> ClassificationData:
    """Texts (or pairs) and labels (class ids, class names, or floats with `regression`).

    `label_names`: the model's classes (names of ids 0..n-1); None: taken from `y`'s
    names, sorted as the file reader sorts them.
    """
    first, second = texts_or_pairs(x)
    examples = [
        TextExample(a, None if second is None else second[i], None, i + 1)
        for i, a in enumerate(first)
    ]
    if y is None:
        return ClassificationData("x", examples, list(label_names or []), np.zeros([0], np.int32))
    labels = column(y, "y", "labels")
    _check_same_length(first, labels, ("x", "y"))
    if regression:
        try:
            values = np.asarray(labels, np.float32)
        except (TypeError, ValueError):
            raise ValueError("`y` must hold numbers for a regression model.") from None
        return ClassificationData("x", examples, [], values)
    if all(isinstance(v, str) for v in labels):
        names = list(label_names) if label_names else sorted_labels(set(labels))
        unknown = sorted(set(labels) - set(names))
        if unknown:
            raise ValueError(
                f"`y` holds label names the model does not know: {unknown[:5]}. Its labels "
                f"are {names}."
            )
        index = {name: i for i, name in enumerate(names)}
        return ClassificationData("x", examples, names, np.array([index[v] for v in labels]))
    ids = np.asarray(labels)
    if ids.dtype.kind not in "iu" and not (ids.dtype.kind == "b"):
        raise ValueError(
            f"`y` must hold class ids (integers) or class names (strings). Received dtype "
            f"{ids.dtype}: {labels[:3]}."
        )
    count = len(label_names) if label_names else int(ids.max()) + 1
    if ids.min() < 0 or ids.max() >= count:
        raise ValueError(
            f"`y` holds class ids outside 0..{count - 1} (the model's {count} classes): "
            f"min {ids.min()}, max {ids.max()}."
        )
    names = list(label_names) if label_names else [str(i) for i in range(count)]
    return ClassificationData("x", examples, names, ids.astype(np.int32))


def _word_lists(x, name: str) -> list[list[str]]:
    sentences = column(x, name, "word lists")
    words = []
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, (str, bytes)) or not isinstance(sentence, Iterable):
            raise ValueError(
                f"`{name}[{i}]` must be a list of words (a sentence split into words). "
                f"Received: {type(sentence).__name__} {str(sentence)[:50]!r}. Split it: "
                f"{name}=[text.split() for text in texts]."
            )
        row = [_text(w) for w in (sentence.tolist() if hasattr(sentence, "tolist") else sentence)]
        _check_strings(row, f"{name}[{i}]")
        words.append(row)
    _check_not_empty(words, name)
    return words


def tagging_data(x, y, tag_names) -> TaggingData:
    """Word lists and (optionally) one tag per word; `tag_names`: the model's tags (None:
    the vocabulary of `y`, `O` first)."""
    words = _word_lists(x, "x")
    if y is None:
        sentences = [TaggedSentence(w, [], i + 1) for i, w in enumerate(words)]
        return TaggingData("x", sentences, list(tag_names or ["O"]), [])
    tags = _word_lists(y, "y")
    _check_same_length(words, tags, ("x", "y"))
    for i, (w, t) in enumerate(zip(words, tags, strict=True)):
        if len(w) != len(t):
            raise ValueError(
                f"`y[{i}]` must hold one tag per word of `x[{i}]`: {len(w)} words, {len(t)} "
                f"tags ({w[:5]} / {t[:5]})."
            )
    names = list(tag_names) if tag_names else tag_vocabulary(t for row in tags for t in row)
    index = {name: i for i, name in enumerate(names)}
    unknown = sorted({t for row in tags for t in row} - set(index))
    if unknown:
        raise ValueError(
            f"`y` holds tags the model does not know: {unknown[:5]}. Its tags: {names}"
        )
    sentences = [
        TaggedSentence(w, t, i + 1) for i, (w, t) in enumerate(zip(words, tags, strict=True))
    ]
    ids = [np.array([index[t] for t in row], np.int32) for row in tags]
    return TaggingData("x", sentences, names, ids)


def _field(value, key: str, name: str) -> list:
    if not isinstance(value, Mapping) or key not in value:
        keys = sorted(value) if isinstance(value, Mapping) else type(value).__name__
        raise ValueError(f"`{name}` must be a dict with the key {key!r}. Received: {keys}.")
    return column(value[key], f'{name}["{key}"]')


def squad_examples(x, y=None) -> list[SquadExample]:
    """`x = {"question": [...], "context": [...]}` and, to train or evaluate,
    `y = {"text": [...], "answer_start": [...]}` (an answer's text and its character offset
    in the context; an empty text marks an unanswerable question; a list of texts and a
    list of offsets give every gold answer, as SQuAD's evaluation sets do)."""
    questions, contexts = _field(x, "question", "x"), _field(x, "context", "x")
    _check_same_length(questions, contexts, ('x["question"]', 'x["context"]'))
    _check_strings(questions, 'x["question"]')
    _check_strings(contexts, 'x["context"]')
    _check_not_empty(questions, 'x["question"]')
    if y is None:
        return [
            SquadExample(str(i), q, c, (), labelled=False)
            for i, (q, c) in enumerate(zip(questions, contexts, strict=True))
        ]
    texts, starts = _field(y, "text", "y"), _field(y, "answer_start", "y")
    _check_same_length(questions, texts, ('x["question"]', 'y["text"]'))
    _check_same_length(texts, starts, ('y["text"]', 'y["answer_start"]'))
    examples = []
    for i, (q, c, text, start) in enumerate(zip(questions, contexts, texts, starts, strict=True)):
        if not text:  # SQuAD 2.0: no answer
            examples.append(SquadExample(str(i), q, c, (), is_impossible=True))
            continue
        several = isinstance(text, (list, tuple))  # every gold answer (evaluation)
        pairs = list(zip(text, start, strict=True)) if several else [(text, start)]
        answers = []
        for j, (answer, offset) in enumerate(pairs):
            offset, where = int(offset), f"[{i}]" + (f"[{j}]" if several else "")
            if c[offset : offset + len(answer)] != answer:
                raise ValueError(
                    f'`y["text"]{where}` {answer!r} is not at `y["answer_start"]{where}` = '
                    f"{offset} of its context, which holds {c[offset : offset + len(answer)]!r} "
                    "there. Give the character offset of the answer in the context."
                )
            answers.append(SquadAnswer(answer, offset))
        examples.append(SquadExample(str(i), q, c, tuple(answers)))
    return examples


def pairs_data(x) -> PairsData:
    """`x = (queries, positives)`: two lists of texts, or a list of `(query, positive)`."""
    if isinstance(x, tuple) and len(x) == 2:
        first, second = texts_or_pairs(x)
    else:
        rows = column(x, "x", "(query, positive) pairs")
        if any(not isinstance(r, (tuple, list)) or len(r) != 2 for r in rows):
            raise ValueError(
                "`x` must be (queries, positives): two lists of texts, or a list of "
                "(query, positive) pairs."
            )
        first, second = texts_or_pairs(([r[0] for r in rows], [r[1] for r in rows]))
    if second is None:
        raise ValueError("`x` must be (queries, positives): two lists of texts.")
    return PairsData("x", list(zip(first, second, strict=True)))


def ranking_data(x, y=None) -> RankingData:
    """`x = (queries, passages)` and optional 0/1 labels `y` (1: relevant)."""
    queries, passages = texts_or_pairs(x)
    if passages is None:
        raise ValueError("`x` must be (queries, passages): two lists of texts.")
    labels = [None] * len(queries)
    if y is not None:
        labels = column(y, "y", "labels")
        _check_same_length(queries, labels, ("x", "y"))
        if any(label not in (0, 1) for label in labels):
            raise ValueError("`y` must hold 0 (irrelevant) or 1 (relevant) for each pair.")
        labels = [int(label) for label in labels]
    pairs = [
        RankingPair(q, p, label, i + 1, f"{q}\t{p}" + ("" if label is None else f"\t{label}"))
        for i, (q, p, label) in enumerate(zip(queries, passages, labels, strict=True))
    ]
    header = ("query", "passage") + (() if y is None else ("label",))
    return RankingData("x", pairs, header)
