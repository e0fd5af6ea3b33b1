"""`run_finetune_embed`, the keyword form of `kbz finetune embed`: contrastive fine-tuning
of an embedder on `query<TAB>positive` pairs with in-batch negatives, run by the engine of
every task (`jobs.finetune.finetune`, with `tasks.embedder.task.EmbeddingTask`), so it
resumes exactly, takes `--strategy`, `--mixed-precision`, `--keep`, `--checkpoint-every` and
LoRA as every task does.
"""

from keras_bert_zoo.jobs.finetune import run_finetune
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER


def run_finetune_embed(preset, train, validation, output, **settings) -> dict:
    """Fine-tunes `preset` as an embedder on `train` pairs, validated by retrieval of the
    `validation` pairs: `run_finetune("embedder", ...)`. `settings`: `FinetuneConfig`'s
    fields and `scale`. Returns (as `output/metrics.json` holds) `{"before": {...}, "after":
    {...}, ...}` with `recall@1`, `recall@5`, `mrr`.

    >>> kbz.jobs.run_finetune_embed("minilm_preset", "pairs.tsv", "val.tsv", "runs/emb")
    """
    return run_finetune(EMBEDDER.name, preset, train, validation, output, **settings)
