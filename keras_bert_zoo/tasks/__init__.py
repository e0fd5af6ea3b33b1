"""The fine-tuning tasks, as `kbz.tasks`: one folder per task (`tasks/<task>/`: `spec.py`,
what the task is as data; `task.py`, its behaviour and its Keras model), the registry of
their specs (`registry`, no Keras) and of their models (`models`: `TASK_MODELS`,
`FINETUNING_TASKS`), and the task graphs and losses (`TASKS`, `build_task`, ...),
re-exported lazily from `keras_bert_zoo.task_graphs`. `docs/adding-a-task.md` says how a
task is added.

>>> model = kbz.tasks.build_task("classifier", encoder, num_classes=3)
>>> model.compile("adam", kbz.tasks.classifier_loss(3))
"""

from keras_bert_zoo._lazy import lazy_attributes

_GRAPHS = "keras_bert_zoo.task_graphs"
_MODELS = "keras_bert_zoo.tasks.models"
_EXPORTS = {
    "FINETUNING_TASKS": _MODELS,
    "TASK_MODELS": _MODELS,
    **{
        name: _GRAPHS
        for name in (
            "IGNORE_LABEL",
            "TASKS",
            "SpanLoss",
            "TokenCrossentropy",
            "build_classifier",
            "build_contrastive_trainer",
            "build_embedder",
            "build_group_scorer",
            "build_question_answerer",
            "build_reranker",
            "build_tagger",
            "build_task",
            "check_task",
            "classifier_loss",
            "in_batch_negatives_loss",
            "listwise_loss",
            "question_answerer_loss",
            "reranker_loss",
            "tagger_loss",
        )
    },
}
_SUBMODULES = ("models", "registry", "spec")
__all__ = sorted([*_EXPORTS, *_SUBMODULES])
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, _SUBMODULES)
