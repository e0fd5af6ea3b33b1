"""What the fine-tuning tasks share (each task itself is a folder of `keras_bert_zoo.tasks`).

- `common`: the `FinetuningTask` protocol each task's behaviour follows, and batched
  tokenization;
- `task_model`, `task_training`, `raw_data`: the `TaskModel` base of the task models (`fit`,
  `predict` on raw data with the defaults of `kbz finetune`), and its raw-data checks;
- `prediction_files`: the prediction files the tasks write, and warnings for degenerate
  predictions; `truncation`: warnings for inputs cut to the sequence length.
"""

from keras_bert_zoo._lazy import lazy_attributes

_EXPORTS = {
    "FinetuningTask": "keras_bert_zoo.finetuning.common",
    "TaskModel": "keras_bert_zoo.finetuning.task_model",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
