"""The fine-tuning tasks: how each task's data becomes model inputs and its outputs files.

- `adapters`: per task, examples from files to model inputs and outputs back to metrics
  (`FINETUNING_TASKS`, keyed by the model's task name);
- `prediction_files`: the prediction files each task writes, and warnings for degenerate
  predictions.
"""

from keras_bert_zoo._lazy import lazy_attributes

_EXPORTS = {"FINETUNING_TASKS": "keras_bert_zoo.finetuning.adapters"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
