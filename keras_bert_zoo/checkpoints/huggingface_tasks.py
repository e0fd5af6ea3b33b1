"""Fine-tuned task heads in Hugging Face form: the name tables and config fields both ways.

Our heads have exactly the structure of transformers' BERT task models, so each converts by
a two-row name table:

- classifier: pooled output (the BERT pooler) -> dropout -> one Dense, as
  `BertForSequenceClassification` (`classifier.*`); `id2label` from `label_names`,
  `problem_type` single_label_classification / multi_label_classification / regression
  (`num_classes=1`), `classifier_dropout` the head's dropout rate.
- tagger: sequence output -> dropout -> one Dense, as `BertForTokenClassification`
  (`classifier.*`, no pooler).
- reranker: the classifier's structure with one output, as sentence-transformers'
  `CrossEncoder` (`BertForSequenceClassification`, `num_labels=1`). A checkpoint is read as a
  reranker when its config.json also carries CrossEncoder's keys (the spec's `markers`), else
  as a one-output (regression) classifier; ours are written with them (the spec's `fields`).
- question_answerer: one Dense(2) on the sequence output, channel 0 the start and 1 the end
  logits, as `BertForQuestionAnswering` (`qa_outputs.*`, no pooler). Ours also masks padding
  positions with a large negative bias; transformers leaves them as the Dense gives them, so
  the two agree on real tokens.

A task config with settings outside these (a head of another structure) is refused before
anything is written, rather than exported as something transformers would compute differently.
"""

import json
from pathlib import Path

from keras_bert_zoo.tasks.registry import SPECS

# Our task -> (transformers architecture, rows `(our path, [hf names], rule)`, pooler used),
# from each task spec's `huggingface` head.
HEADS = {name: spec.huggingface for name, spec in SPECS.items() if spec.huggingface}
TASK_HEADS = {
    name: (head.architecture, list(head.rows), head.pooler) for name, head in HEADS.items()
}
# Each architecture's default task: its head without markers (see `HuggingFaceHead`).
ARCHITECTURE_TASKS = {head.architecture: task for task, head in HEADS.items() if not head.markers}
_PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def _default_name(index: int) -> str:
    return f"LABEL_{index}"  # transformers' name for a label nobody named


def check_exportable_task(task: str, task_config: dict, source: str) -> None:
    """Refuses a task head whose settings describe a structure transformers does not have."""
    unknown = sorted(set(task_config) - HEADS[task].settings)
    if unknown:
        raise ValueError(
            f"{source}: the {task} head has settings {unknown} that "
            f"{TASK_HEADS[task][0]} does not have (a head of another structure); nothing was "
            "written. Export the encoder instead: kbz.from_preset(PRESET, task='encoder') gives "
            "it, and kbz.save_preset writes it as a preset of task 'encoder'."
        )


def huggingface_task_fields(task: str, task_config: dict) -> dict:
    """transformers config fields of a task head: `num_labels`, `id2label`, `problem_type`."""
    head, label_count = HEADS[task], SPECS[task].label_count
    if label_count is None:  # a fixed width: span logits (start, end), one score
        fields = {"num_labels": head.num_labels, **head.fields}
        if "dropout" in head.settings:
            fields["classifier_dropout"] = task_config["dropout"]
        return fields
    count = task_config[label_count]
    names = task_config.get("label_names") or [_default_name(i) for i in range(count)]
    fields = {
        "num_labels": count,
        "id2label": {str(i): name for i, name in enumerate(names)},
        "label2id": {name: i for i, name in enumerate(names)},
        "classifier_dropout": task_config["dropout"],
    }
    if head.problem_type:
        multi = task_config.get("multi_label")
        fields["problem_type"] = _PROBLEM_TYPES[2 if count == 1 else 1 if multi else 0]
    return fields


def _label_names(config: dict, count: int, config_path: Path):
    id2label = config.get("id2label") or {}
    try:
        names = [str(id2label[key]) for key in sorted(id2label, key=int)]
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{config_path}: id2label must map label numbers to names. Received: {id2label!r}"
        ) from error
    if not names or names == [_default_name(i) for i in range(count)]:
        return None  # transformers' placeholders: the labels were never named
    if len(names) != count:
        raise ValueError(
            f"{config_path}: id2label names {len(names)} labels, but the head has {count}."
        )
    return names


def _marked_task(task: str, config: dict, count: int) -> str:
    """The head of `task`'s architecture whose markers `config` carries at its width, if any."""
    for other, head in HEADS.items():
        marked = any(key in config for key in head.markers)
        if head.architecture == HEADS[task].architecture and marked and count == head.num_labels:
            return other
    return task


def read_huggingface_task(config_path: Path, tensors: dict, source_file) -> tuple:
    """`(task, task_config, rows)` of a transformers BERT task checkpoint, else `(None, {}, [])`.

    The head's width comes from its weights, the rest from config.json: `id2label` gives
    `label_names` (None for transformers' LABEL_0, LABEL_1, ... placeholders), `problem_type`
    `multi_label`, `classifier_dropout` (else `hidden_dropout_prob`) the dropout rate.
    """
    config = json.loads(Path(config_path).read_text())
    architectures = config.get("architectures") or []
    tasks = [ARCHITECTURE_TASKS[a] for a in architectures if a in ARCHITECTURE_TASKS]
    has_head = any(name.startswith(("classifier.", "qa_outputs.")) for name in tensors)
    if not tasks:
        if has_head:
            raise ValueError(
                f"{source_file} holds a task head (classifier.* or qa_outputs.*), but "
                f"{config_path} names no BERT task model in `architectures` ({architectures}); "
                f"expected one of {sorted(ARCHITECTURE_TASKS)}. Add it to config.json."
            )
        return None, {}, []
    task = tasks[0]
    rows = TASK_HEADS[task][1]
    weight = tensors.get(rows[0][1][0])
    if weight is None:
        raise ValueError(
            f"{source_file}: variable {rows[0][1][0]} is missing, but {config_path} says "
            f"{TASK_HEADS[task][0]}; the checkpoint is incomplete."
        )
    count = int(weight.shape[0])
    task = _marked_task(task, config, count)
    rows, head, label_count = TASK_HEADS[task][1], HEADS[task], SPECS[task].label_count
    dropout = config.get("classifier_dropout")
    dropout = config.get("hidden_dropout_prob", 0.1) if dropout is None else dropout
    if label_count is None:
        return task, ({"dropout": dropout} if "dropout" in head.settings else {}), rows
    task_config = {"dropout": dropout, "label_names": _label_names(config, count, config_path)}
    task_config[label_count] = count
    if not head.problem_type:
        return task, task_config, rows
    problem = config.get("problem_type")
    if problem is not None and problem not in _PROBLEM_TYPES:
        raise ValueError(
            f"{config_path}: problem_type {problem!r} is not one of {list(_PROBLEM_TYPES)}."
        )
    if (problem == "regression") != (count == 1):
        raise ValueError(
            f"{config_path}: problem_type {problem!r} with {count} labels; a regression head "
            "has exactly one output (ours: num_classes=1), a classifier two or more."
        )
    task_config["multi_label"] = problem == "multi_label_classification"
    return task, task_config, rows
