"""The fine-tuning tasks, as `kbz.tasks`: the task graphs, their losses and the task
vocabulary (`TASKS`, `build_task`), re-exported lazily from `keras_bert_zoo.task_graphs`.

This package is where each task's folder (`tasks/<task>/`: spec, model class, reader,
metrics, serving outputs) is meant to live; see `docs/adding-a-task.md` for where a task's
pieces are today.

>>> model = kbz.tasks.build_task("classifier", encoder, num_classes=3)
>>> model.compile("adam", kbz.tasks.classifier_loss(3))
"""

from keras_bert_zoo._lazy import lazy_attributes

_GRAPHS = "keras_bert_zoo.task_graphs"
_EXPORTS = {
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
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
