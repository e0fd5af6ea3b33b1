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
  reranker when its config.json carries CrossEncoder's marker (`sentence_transformers` or
  `sbert_ce_default_activation_function`), else as a one-output (regression) classifier;
  ours are written with the marker and the identity activation (the score is the logit).
- question_answerer: one Dense(2) on the sequence output, channel 0 the start and 1 the end
  logits, as `BertForQuestionAnswering` (`qa_outputs.*`, no pooler). Ours also masks padding
  positions with a large negative bias; transformers leaves them as the Dense gives them, so
  the two agree on real tokens.

A task config with settings outside these (a head of another structure) is refused before
anything is written, rather than exported as something transformers would compute differently.
"""

import json
from pathlib import Path

# Our task -> (transformers architecture, rows `(our path, [hf names], rule)`, pooler used).
TASK_HEADS = {
    "classifier": (
        "BertForSequenceClassification",
        [
            ("classifier_head/kernel", ["classifier.weight"], "transpose"),
            ("classifier_head/bias", ["classifier.bias"], None),
        ],
        True,
    ),
    "tagger": (
        "BertForTokenClassification",
        [
            ("tagger_head/kernel", ["classifier.weight"], "transpose"),
            ("tagger_head/bias", ["classifier.bias"], None),
        ],
        False,
    ),
    "reranker": (
        "BertForSequenceClassification",
        [
            ("reranker_head/kernel", ["classifier.weight"], "transpose"),
            ("reranker_head/bias", ["classifier.bias"], None),
        ],
        True,
    ),
    "question_answerer": (
        "BertForQuestionAnswering",
        [
            ("span_head/kernel", ["qa_outputs.weight"], "transpose"),
            ("span_head/bias", ["qa_outputs.bias"], None),
        ],
        False,
    ),
}
# A BertForSequenceClassification is a classifier unless CrossEncoder's marker says reranker.
ARCHITECTURE_TASKS = {
    architecture: task for task, (architecture, _, _) in TASK_HEADS.items() if task != "reranker"
}
# sentence-transformers' CrossEncoder config.json keys (v4's, then the earlier one), and the
# activation ours record: the identity, since our score is the logit (`kbz predict rerank`).
CROSS_ENCODER_KEYS = ("sentence_transformers", "sbert_ce_default_activation_function")
IDENTITY = "torch.nn.modules.linear.Identity"
# The settings each head's structure is defined by; any other key is another structure.
_TASK_SETTINGS = {
    "classifier": {"num_classes", "dropout", "multi_label", "label_names"},
    "tagger": {"num_tags", "dropout", "label_names"},
    "question_answerer": set(),
    "reranker": {"dropout"},
}
_PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def _default_name(index: int) -> str:
    return f"LABEL_{index}"  # transformers' name for a label nobody named


def check_exportable_task(task: str, task_config: dict, source: str) -> None:
    """Refuses a task head whose settings describe a structure transformers does not have."""
    unknown = sorted(set(task_config) - _TASK_SETTINGS[task])
    if unknown:
        raise ValueError(
            f"{source}: the {task} head has settings {unknown} that "
            f"{TASK_HEADS[task][0]} does not have (a head of another structure); nothing was "
            "written. Export the encoder instead: kbz.from_preset(PRESET, task='encoder') gives "
            "it, and kbz.save_preset writes it as a preset of task 'encoder'."
        )


def huggingface_task_fields(task: str, task_config: dict) -> dict:
    """transformers config fields of a task head: `num_labels`, `id2label`, `problem_type`."""
    if task == "question_answerer":
        return {"num_labels": 2}  # qa_outputs is Linear(hidden, num_labels)
    if task == "reranker":
        return {
            "num_labels": 1,
            "id2label": {"0": _default_name(0)},
            "label2id": {_default_name(0): 0},
            "classifier_dropout": task_config["dropout"],
            "sentence_transformers": {"activation_fn": IDENTITY},
            "sbert_ce_default_activation_function": IDENTITY,
        }
    count = task_config["num_classes"] if task == "classifier" else task_config["num_tags"]
    names = task_config.get("label_names") or [_default_name(i) for i in range(count)]
    fields = {
        "num_labels": count,
        "id2label": {str(i): name for i, name in enumerate(names)},
        "label2id": {name: i for i, name in enumerate(names)},
        "classifier_dropout": task_config["dropout"],
    }
    if task == "classifier":
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
    if task == "question_answerer":
        return task, {}, rows
    count = int(weight.shape[0])
    dropout = config.get("classifier_dropout")
    dropout = config.get("hidden_dropout_prob", 0.1) if dropout is None else dropout
    task_config = {"dropout": dropout, "label_names": _label_names(config, count, config_path)}
    if task == "tagger":
        return task, {"num_tags": count, **task_config}, rows
    if count == 1 and any(key in config for key in CROSS_ENCODER_KEYS):
        return "reranker", {"dropout": dropout}, TASK_HEADS["reranker"][1]
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
    multi = problem == "multi_label_classification"
    return task, {"num_classes": count, "multi_label": multi, **task_config}, rows
