"""The built-in task models, keyed by task name (`TASK_MODELS`), and their behaviours
(`FINETUNING_TASKS`): the one list of them on the Keras side, as `tasks.registry` is of their
specs (`tests/test_task_registry.py` keeps the two in step). Importing this module registers
every task model class with Keras, so `load_model` reads their `.keras` files.
"""

from keras_bert_zoo.saving import models
from keras_bert_zoo.tasks.classifier.task import BertClassifier
from keras_bert_zoo.tasks.embedder.task import BertEmbedder
from keras_bert_zoo.tasks.question_answerer.task import BertQuestionAnswerer
from keras_bert_zoo.tasks.reranker.task import BertReranker
from keras_bert_zoo.tasks.tagger.task import BertTagger

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
