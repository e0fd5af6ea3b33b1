"""Training: optimizers and schedules, devices and precision, exact resume, and the jobs.

- `optimizers`: `create_optimizer` (AdamW / LAMB with BERT's decay exclusions) and
  `WarmupLinearDecay`;
- `distributed`: `get_strategy`, `set_precision`, and `StrategyTrainer` for `tf.distribute`;
- `resume`: `fit_resumable`, checkpoints at step intervals (and in time) and exact resume;
  `checkpoint_files`: the atomic checkpoint files, `state.json` and the fallback on damage;
- `batching`: length bucketing, the seeded batch schedule of fine-tuning and trimmed
  prediction batches;
- `finetuning`: task data to model inputs and back to metrics, per fine-tuning task;
- `runs` / `pretrain_runs`: `run_finetune` / `run_pretrain`, the jobs behind `kbz finetune` /
  `kbz pretrain`, in output directories held by `rundir.RunDirectory`;
- `predict`: `run_predict`, the job behind `kbz predict` (prediction files in `predictions`);
- `embed`: `embed_texts` / `run_embed` (`kbz embed`), sentence vectors of an embedder;
  `contrastive`: `run_finetune_embed` (`kbz finetune embed`), in-batch negatives training.

>>> optimizer = kbz.training.create_optimizer(2e-5, total_steps=1000)
"""

from keras_bert_zoo.training.contrastive import run_finetune_embed
from keras_bert_zoo.training.distributed import (
    PRECISIONS,
    STRATEGIES,
    StrategyTrainer,
    get_strategy,
    set_precision,
)
from keras_bert_zoo.training.embed import embed_texts, load_embedder, recall_at_k, run_embed
from keras_bert_zoo.training.finetuning import FINETUNING_TASKS
from keras_bert_zoo.training.optimizers import NO_DECAY, WarmupLinearDecay, create_optimizer
from keras_bert_zoo.training.predict import run_predict
from keras_bert_zoo.training.pretrain_runs import run_pretrain
from keras_bert_zoo.training.resume import fit_resumable
from keras_bert_zoo.training.runs import run_finetune

__all__ = [
    "FINETUNING_TASKS",
    "NO_DECAY",
    "PRECISIONS",
    "STRATEGIES",
    "StrategyTrainer",
    "WarmupLinearDecay",
    "create_optimizer",
    "embed_texts",
    "fit_resumable",
    "get_strategy",
    "load_embedder",
    "recall_at_k",
    "run_embed",
    "run_finetune",
    "run_finetune_embed",
    "run_predict",
    "run_pretrain",
    "set_precision",
]
