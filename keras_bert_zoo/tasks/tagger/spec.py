"""The tagger task as data (`keras_bert_zoo.tasks.spec`): importable without Keras."""

from keras_bert_zoo.tasks.spec import (
    HuggingFaceHead,
    TaskOption,
    TaskSpec,
    classifier_rows,
    schedule,
)

TAGGER = TaskSpec(
    name="tagger",
    cli_name="tag",
    summary="token tagging (named entities), labels on each word's first sub-word",
    train_file="CoNLL: a word and its tag per line, a blank line between sentences",
    file_kind="CoNLL",
    defaults=schedule(learning_rate=1e-4, batch_size=16, epochs=3, sequence_length=128),
    options=(
        TaskOption(
            "head_bias",
            str,
            "prior",
            "a new head's bias: the training tags' log frequencies (prior), or zeros as "
            "transformers starts it (zero)",
            predict=False,
            choices=("prior", "zero"),
        ),
    ),
    prediction_file="predictions.conll",
    serving_outputs=("tags", "words", "word_tags", "tag_names", "word_tag_names"),
    pooler=False,
    huggingface=HuggingFaceHead(
        "BertForTokenClassification",
        classifier_rows("tagger_head", "classifier"),
        pooler=False,
        settings=frozenset({"num_tags", "dropout", "label_names"}),
    ),
    sequence_outputs=True,
    label_count="num_tags",
    streams=True,
    serving="tags",
)
