"""Training: optimizers and schedules, devices and precision, exact resume, and the jobs.

- `optimizers`: `create_optimizer` (AdamW / LAMB with BERT's decay exclusions),
  `WarmupLinearDecay`, and `AdamW` (epsilon as PyTorch and Hugging Face place it);
- `distributed`: `get_strategy`, `set_precision`, and `StrategyTrainer` for `tf.distribute`;
- `resume`: `fit_resumable`, checkpoints at step intervals (and in time) and exact resume;
  `checkpoint_files`: the atomic checkpoint files, `state.json` and the fallback on damage;
- `compile_cache`: `enable_compile_cache`, XLA's compiled programs kept on disk across runs;
- `batching`: length bucketing, the seeded batch schedule of fine-tuning and trimmed
  prediction batches;
- `finetuning`: task data to model inputs and back to metrics, per fine-tuning task;
- `runs` / `pretrain_runs`: `run_finetune` / `run_pretrain`, the jobs behind `kbz finetune` /
  `kbz pretrain`, in output directories held by `rundir.RunDirectory`;
- `predict`: `run_predict`, the job behind `kbz predict` (prediction files in `predictions`);
- `embed`: `embed_texts` / `run_embed` (`kbz embed`), sentence vectors of an embedder;
  `contrastive`: `run_finetune_embed` (`kbz finetune embed`), in-batch negatives training.

Names are imported when first used (PEP 562): `training.optimizers` on JAX or PyTorch does
not import TensorFlow, which the data pipelines and `tf.distribute` code need.

>>> optimizer = kbz.training.create_optimizer(2e-5, total_steps=1000)
"""

from keras_bert_zoo._lazy import lazy_attributes

_PACKAGE = "keras_bert_zoo.training"
_EXPORTS = {
    "AdamW": f"{_PACKAGE}.optimizers",
    "FINETUNING_TASKS": f"{_PACKAGE}.finetuning",
    "NO_DECAY": f"{_PACKAGE}.optimizers",
    "PRECISIONS": f"{_PACKAGE}.distributed",
    "STRATEGIES": f"{_PACKAGE}.distributed",
    "StrategyTrainer": f"{_PACKAGE}.distributed",
    "WarmupLinearDecay": f"{_PACKAGE}.optimizers",
    "create_optimizer": f"{_PACKAGE}.optimizers",
    "embed_texts": f"{_PACKAGE}.embed",
    "enable_compile_cache": f"{_PACKAGE}.compile_cache",
    "fit_resumable": f"{_PACKAGE}.resume",
    "get_strategy": f"{_PACKAGE}.distributed",
    "load_embedder": f"{_PACKAGE}.embed",
    "recall_at_k": f"{_PACKAGE}.embed",
    "run_embed": f"{_PACKAGE}.embed",
    "run_finetune": f"{_PACKAGE}.runs",
    "run_finetune_embed": f"{_PACKAGE}.contrastive",
    "run_predict": f"{_PACKAGE}.predict",
    "run_pretrain": f"{_PACKAGE}.pretrain_runs",
    "set_precision": f"{_PACKAGE}.distributed",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
