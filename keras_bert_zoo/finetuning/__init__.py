"""The fine-tuning tasks' behaviour: task data from files to model inputs, and outputs back to
predictions, metrics and files (what a task is, as data: `keras_bert_zoo.tasks.registry`).

- `registry`: `FINETUNING_TASKS`, the behaviour classes keyed by the model's task name;
- `common`: the `FinetuningTask` protocol they follow, and batched tokenization;
- `classifier`, `tagger`, `question_answerer`, `reranking`, `embedding`: one module per task;
- `prediction_files`: the prediction files the tasks write, and warnings for degenerate
  predictions; `truncation`: warnings for inputs cut to the sequence length.
"""

from keras_bert_zoo._lazy import lazy_attributes

_EXPORTS = {
    "FINETUNING_TASKS": "keras_bert_zoo.finetuning.registry",
    "FinetuningTask": "keras_bert_zoo.finetuning.common",
    "ClassificationTask": "keras_bert_zoo.finetuning.classifier",
    "EmbeddingTask": "keras_bert_zoo.finetuning.embedding",
    "TaggingTask": "keras_bert_zoo.finetuning.tagger",
    "QuestionAnsweringTask": "keras_bert_zoo.finetuning.question_answerer",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
