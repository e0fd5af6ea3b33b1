"""Training primitives: optimizers and schedules, devices and precision, exact resume, batching.

- `optimizers`: `create_optimizer` (AdamW / LAMB with BERT's decay exclusions),
  `WarmupLinearDecay`, `AdamW` (epsilon as PyTorch and Hugging Face place it) and `Lamb`,
  both clipping the global batch's gradient (`GlobalBatchClip`);
- `distributed`: `get_strategy`, `set_precision`, and `StrategyTrainer` for `tf.distribute`;
  `processes`: data parallel on JAX over several processes (process 0 writes);
- `resume`: `fit_resumable`, checkpoints at step intervals (and in time) and exact resume;
  `checkpoint_files`: the atomic checkpoint files, `state.json` and the fallback on damage;
- `compile_cache`: `enable_compile_cache`, XLA's compiled programs kept on disk across runs;
- `batching`: length bucketing and the seeded batch schedule of fine-tuning;
  `bucketed_prediction`: evaluation and prediction in trimmed length buckets;
  `bucket_choice`: the bucket lengths a training set gets;
  `distinct_batches`: in-batch-negatives batches, no text twice in one (the embedder's).

The end-to-end jobs the command line runs (`run_finetune`, `run_pretrain`, ...) are in
`keras_bert_zoo.jobs`; the fine-tuning tasks' data and prediction glue in
`keras_bert_zoo.finetuning`.

Names are imported when first used (PEP 562): `training.optimizers` on JAX or PyTorch does
not import TensorFlow, which the data pipelines and `tf.distribute` code need.

>>> optimizer = kbz.training.create_optimizer(2e-5, total_steps=1000)
"""

from keras_bert_zoo._lazy import lazy_attributes

_PACKAGE = "keras_bert_zoo.training"
_EXPORTS = {
    "AdamW": f"{_PACKAGE}.optimizers",
    "GlobalBatchClip": f"{_PACKAGE}.optimizers",
    "Lamb": f"{_PACKAGE}.optimizers",
    "NO_DECAY": f"{_PACKAGE}.optimizers",
    "PRECISIONS": f"{_PACKAGE}.distributed",
    "STRATEGIES": f"{_PACKAGE}.distributed",
    "StrategyTrainer": f"{_PACKAGE}.distributed",
    "WarmupLinearDecay": f"{_PACKAGE}.optimizers",
    "create_optimizer": f"{_PACKAGE}.optimizers",
    "enable_compile_cache": f"{_PACKAGE}.compile_cache",
    "fit_resumable": f"{_PACKAGE}.resume",
    "get_strategy": f"{_PACKAGE}.distributed",
    "set_precision": f"{_PACKAGE}.distributed",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
