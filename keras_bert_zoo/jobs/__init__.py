"""The jobs the `kbz` command line runs, each from its inputs to its output directory.

- `config`: the run settings of each training job as a frozen dataclass (`FinetuneConfig`,
  `PretrainConfig`), whose fields are the commands' flags;
- `finetune`: `finetune(config)` (`kbz finetune TASK`, every task; `run_finetune` its keyword
  form), in a `rundir.RunDirectory`, validated after every interval
  (`validation.ValidationCallback`);
- `finetune_embed`: `run_finetune_embed`, `run_finetune` of the embedder (in-batch negatives);
- `pretrain`: `pretrain(config)` (`kbz pretrain`), MLM + NSP from TFRecords or raw text;
- `predict`: `run_predict` (`kbz predict`), a fine-tuned run's predictions on a file;
- `embed`: `embed_texts` / `run_embed` (`kbz embed`), sentence vectors of an embedder;
- `checks`: what every job checks of its flags and paths before any work.

They build on `keras_bert_zoo.training`'s primitives; nothing below imports a job.

>>> kbz.jobs.run_finetune("classifier", "my_preset", "train.tsv", "runs/sst2")
"""

from keras_bert_zoo._lazy import lazy_attributes

_PACKAGE = "keras_bert_zoo.jobs"
_EXPORTS = {
    "FinetuneConfig": f"{_PACKAGE}.config",
    "PretrainConfig": f"{_PACKAGE}.config",
    "embed_texts": f"{_PACKAGE}.embed",
    "load_embedder": f"{_PACKAGE}.embed",
    "load_predictor": f"{_PACKAGE}.predictors",
    "recall_at_k": f"{_PACKAGE}.embed",
    "run_embed": f"{_PACKAGE}.embed",
    "run_finetune": f"{_PACKAGE}.finetune",
    "run_finetune_embed": f"{_PACKAGE}.finetune_embed",
    "run_predict": f"{_PACKAGE}.predict",
    "run_pretrain": f"{_PACKAGE}.pretrain",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
