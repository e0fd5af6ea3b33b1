"""The classifier task as data (`keras_bert_zoo.tasks.spec`): importable without Keras."""

from keras_bert_zoo.tasks.spec import (
    HuggingFaceHead,
    TaskOption,
    TaskSpec,
    classifier_rows,
    columns,
    schedule,
)

CLASSIFIER = TaskSpec(
    name="classifier",
    cli_name="classify",
    summary="sentence (or sentence-pair) classification or regression",
    train_file="GLUE-style TSV with a header: the text column(s) and the label column",
    file_kind="GLUE-style TSV",
    defaults=schedule(learning_rate=5e-5, batch_size=32, epochs=3, sequence_length=128),
    options=(
        TaskOption(
            "text_columns",
            columns,
            ("sentence",),
            "comma-separated text column(s), e.g. question,sentence",
        ),
        TaskOption("label_column", str, "label", "label column"),
        TaskOption("regression", bool, False, "float labels: one score, MSE loss", predict=False),
    ),
    prediction_file="predictions.tsv",
    serving_outputs=("probabilities", "label", "label_name", "score"),
    huggingface=HuggingFaceHead(
        "BertForSequenceClassification",
        classifier_rows("classifier_head", "classifier"),
        pooler=True,
        settings=frozenset({"num_classes", "dropout", "multi_label", "label_names"}),
        problem_type=True,
    ),
    label_count="num_classes",
    streams=True,
    packs_predictions=True,
)
