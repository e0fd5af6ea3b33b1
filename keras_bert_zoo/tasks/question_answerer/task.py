"""The question answerer: `BertQuestionAnswerer` (the task model) and its behaviour, SQuAD
v1.1 / v2.0 extractive question answering with doc-stride windows (`QUESTION_ANSWERER`)."""

import dataclasses
from pathlib import Path

import keras
import numpy as np

from keras_bert_zoo import data
from keras_bert_zoo.finetuning.common import FinetuningTask, batched, specials
from keras_bert_zoo.finetuning.prediction_files import NBEST_FILE, write_squad
from keras_bert_zoo.finetuning.raw_data import column, squad_examples
from keras_bert_zoo.finetuning.task_model import TaskModel
from keras_bert_zoo.task_graphs import question_answerer_loss
from keras_bert_zoo.tasks.question_answerer.spec import QUESTION_ANSWERER

_DEFAULT = QUESTION_ANSWERER.default


@dataclasses.dataclass
class QuestionAnsweringTask(FinetuningTask):
    """SQuAD v1.1 / v2.0 extractive question answering with doc-stride windows."""

    preprocessor: object
    doc_stride: int = _DEFAULT("doc_stride")
    max_query_length: int = _DEFAULT("max_query_length")
    n_best_size: int = _DEFAULT("n_best_size")
    max_answer_length: int = _DEFAULT("max_answer_length")
    spec = QUESTION_ANSWERER
    sequence_outputs = True  # start/end logits per token (targets are positions)

    def read(self, path, label_names=None, labels_optional=False):
        """The SQuAD file; with `labels_optional`, questions without answers read too."""
        return data.read_squad(path, answers_optional=labels_optional)

    def arrays(self, examples):
        tokenizer = self.preprocessor.tokenizer
        texts = sorted({e.question for e in examples} | {e.context for e in examples})
        spans = dict(zip(texts, batched(tokenizer, texts, offsets=True), strict=True))
        features = data.build_squad_features(
            examples,
            spans.__getitem__,
            max_seq_length=self.preprocessor.sequence_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
            **specials(tokenizer),
        )
        targets = {"start_logits": features.start_positions, "end_logits": features.end_positions}
        return features.inputs(), targets, features

    def loss(self, examples):
        return question_answerer_loss()

    def raw_dataset(self, inputs: list, label_names):
        """`{"question", "context"}` dicts."""
        return [
            data.SquadExample(str(n), i["question"], i["context"], (), labelled=False)
            for n, i in enumerate(inputs)
        ]

    def raw_results(self, dataset, predictions) -> list:
        return [(predictions["answers"][e.qas_id], predictions["nbest"][e.qas_id]) for e in dataset]

    def decode(self, output, label_names):
        return {"answer": output[0], "nbest": output[1]}

    def predict(self, examples, outputs, features):
        """`{"answers": {id: text}, "nbest": {id: [...]}}` as run_squad.py writes them."""
        logits = (np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"]))
        options = dict(n_best_size=self.n_best_size, max_answer_length=self.max_answer_length)
        return {
            "answers": data.postprocess(examples, features, *logits, **options),
            "nbest": data.nbest_predictions(examples, features, *logits, **options),
        }

    def metrics(self, examples, predictions, warn=True):
        """Official SQuAD exact match and F1, in percent as the official script reports, over
        the questions with answers (or `is_impossible`); {} when none has."""
        labelled = [e for e in examples if e.labelled]
        if not labelled:
            return {}
        return data.squad_evaluate(labelled, predictions["answers"])

    @staticmethod
    def prediction_paths(path) -> list:
        return [Path(path), Path(path).with_name(NBEST_FILE)]

    def write_predictions(self, examples, predictions, path):
        return write_squad(path, predictions["answers"], predictions["nbest"])


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertQuestionAnswerer(TaskModel):
    """Extractive question answering on raw questions and contexts; long contexts are cut
    into windows `doc_stride` tokens apart, as `kbz finetune qa` does.

    `fit(x={"question": [...], "context": [...]}, y={"text": [...], "answer_start": [...]})`
    (an empty text: no answer, SQuAD 2.0). `answer(questions, contexts)` gives the answer
    text of each question (with `n_best=True`, its candidates with their probabilities).

    >>> qa = kbz.BertQuestionAnswerer.from_preset("all_minilm_l6_v2")
    >>> qa.answer(["Where is the Eiffel tower?"], ["The Eiffel tower is in Paris."])
    ['Paris']
    """

    task_name = QUESTION_ANSWERER.name
    behaviour = QuestionAnsweringTask

    def raw_data(self, x, y=None):
        return squad_examples(x, y)

    def labelled(self, dataset):
        return all(example.labelled for example in dataset)

    def answer(self, questions, contexts, n_best: bool = False, batch_size=None) -> list:
        """The answer text of each question in its context (`n_best`: its candidates, each a
        dict with `text`, `probability`, `start_logit` and `end_logit`, best first)."""
        questions = column(questions, "questions")
        examples = squad_examples({"question": questions, "context": column(contexts, "contexts")})
        predictions = self.decode(examples, batch_size)
        key = "nbest" if n_best else "answers"
        return [predictions[key][example.qas_id] for example in examples]
