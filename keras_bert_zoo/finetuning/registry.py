"""The fine-tuning tasks, keyed by task name: each task's behaviour and its task model.

Each behaviour's `spec` (`keras_bert_zoo.tasks.registry`) holds its names, defaults and
flags; `tests/test_task_registry.py` checks that the registries agree. Importing this module
registers every task model class with Keras, so `load_model` reads their `.keras` files.
"""

from keras_bert_zoo.finetuning.classifier import BertClassifier
from keras_bert_zoo.finetuning.embedding import BertEmbedder
from keras_bert_zoo.finetuning.question_answerer import BertQuestionAnswerer
from keras_bert_zoo.finetuning.reranking import BertReranker
from keras_bert_zoo.finetuning.tagger import BertTagger
from keras_bert_zoo.saving import models

TASK_MODELS = {
    model.task_name: model
    for model in (BertClassifier, BertTagger, BertQuestionAnswerer, BertReranker, BertEmbedder)
}
FINETUNING_TASKS = {name: model.behaviour for name, model in TASK_MODELS.items()}


def load_model(path, compile: bool = True):
    """Loads a `.keras` file saved from a model of this package (safe mode), the task models
    (`kbz.BertClassifier`, ...) with their preprocessor: they take raw data again.

    >>> model = kbz.load_model("runs/sst2/model.keras")
    >>> model.classify(["a gorgeous film"])
    ['positive']
    """
    return models.load_model(path, compile=compile)
