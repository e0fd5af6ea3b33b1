"""The fine-tuning tasks' behaviours, keyed by task name: one line per task.

Each class's `spec` (`keras_bert_zoo.task_specs.SPECS`) holds its names, defaults and flags;
`tests/test_task_registry.py` checks that the two registries agree.
"""

from keras_bert_zoo.finetuning.classifier import ClassificationTask
from keras_bert_zoo.finetuning.embedding import EmbeddingTask
from keras_bert_zoo.finetuning.question_answerer import QuestionAnsweringTask
from keras_bert_zoo.finetuning.reranking import RerankingTask
from keras_bert_zoo.finetuning.tagger import TaggingTask

FINETUNING_TASKS = {
    task.spec.name: task
    for task in (
        ClassificationTask,
        TaggingTask,
        QuestionAnsweringTask,
        RerankingTask,
        EmbeddingTask,
    )
}
