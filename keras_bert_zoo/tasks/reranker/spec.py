"""The reranker task as data (`keras_bert_zoo.tasks.spec`): importable without Keras."""

from keras_bert_zoo.tasks.spec import (
    HuggingFaceHead,
    TaskOption,
    TaskSpec,
    classifier_rows,
    schedule,
)

# CrossEncoder's activation in config.json: the identity, since our score is the logit.
_IDENTITY = "torch.nn.modules.linear.Identity"
RERANKER = TaskSpec(
    name="reranker",
    cli_name="rerank",
    summary="cross-encoder reranking: one relevance score per (query, passage) pair",
    train_file="TSV with the header query<TAB>passage<TAB>label, label 1 (relevant) or 0, "
    "any number of rows per query",
    file_kind="query<TAB>passage<TAB>label TSV",
    # benchmarks/RESULTS.md, "Reranker"; 256: a query and a paragraph.
    defaults=schedule(learning_rate=5e-5, batch_size=16, epochs=1, sequence_length=256),
    options=(
        TaskOption(
            "ranking_loss",
            str,
            "listwise",
            "listwise: softmax cross-entropy over query groups (each relevant pair and "
            "--num-negatives negatives of its query; --batch-size counts pairs, a multiple "
            "of the group size); pointwise: sigmoid cross-entropy of each pair's 0/1 label",
            predict=False,
            choices=("listwise", "pointwise"),
        ),
        TaskOption(
            "negatives_from",
            str,
            None,
            "an embedder (preset name or directory, or a kbz finetune embed run) that mines "
            "hard negatives for each training query from the training file's own passages, "
            "labelled 0",
            predict=False,
        ),
        TaskOption(
            "num_negatives",
            int,
            3,
            "hard negatives mined per query (--negatives-from), and with --ranking-loss listwise "
            "the negatives in each query group",
            predict=False,
        ),
        TaskOption(
            "top_k", int, 10, "the k of the recall_at_k metric (MRR is at 10, recall at 1 too)"
        ),
    ),
    prediction_file="predictions.tsv",
    serving_outputs=("score",),
    pair_input=True,
    pair_names=("query", "passage"),
    streams=True,
    packs_predictions=True,  # its (query, passage) pairs, read at their [CLS]
    huggingface=HuggingFaceHead(
        "BertForSequenceClassification",
        classifier_rows("reranker_head", "classifier"),
        pooler=True,
        settings=frozenset({"dropout"}),
        num_labels=1,
        markers=("sentence_transformers", "sbert_ce_default_activation_function"),
        fields={
            "sentence_transformers": {"activation_fn": _IDENTITY},
            "sbert_ce_default_activation_function": _IDENTITY,
        },
    ),
)
