"""The embedder task as data (`keras_bert_zoo.tasks.spec`): importable without Keras."""

from keras_bert_zoo.tasks.spec import TaskOption, TaskSpec, schedule

# Contrastive, in-batch negatives; validated by retrieval.
EMBEDDER = TaskSpec(
    name="embedder",
    cli_name="embed",
    summary="sentence embeddings, contrastive with in-batch negatives",
    train_file="TSV of pairs with a header: query<TAB>positive (or anchor/sentence1 ...)",
    file_kind="query<TAB>positive pairs TSV",
    defaults=schedule(learning_rate=2e-5, batch_size=32, epochs=3, sequence_length=128),
    options=(
        TaskOption(
            "scale",
            float,
            20.0,
            "cosine scale of the in-batch loss (sentence-transformers')",
            predict=False,
        ),
    ),
    serving_outputs=("embeddings",),
    pooler=False,
    vectors=True,
    serving="vectors",
)
