"""The question answerer task as data (`keras_bert_zoo.tasks.spec`): importable without Keras."""

from keras_bert_zoo.tasks.spec import (
    HuggingFaceHead,
    TaskOption,
    TaskSpec,
    classifier_rows,
    schedule,
)

# google-research/bert's convention; docs/command-line.md's "--doc-stride" derives the conversion.
_DOC_STRIDE = (
    "tokens between the starts of consecutive context windows (run_squad.py's doc_stride; "
    "Hugging Face run_qa.py's --doc_stride S is their overlap: the same windows take "
    "L - 3 - q - S for sequence length L and a q-token question)"
)
QUESTION_ANSWERER = TaskSpec(
    name="question_answerer",
    cli_name="qa",
    summary="extractive question answering, SQuAD v1.1 / v2.0",
    train_file="SQuAD JSON (v1.1, or v2.0 with is_impossible)",
    file_kind="SQuAD JSON",
    defaults=schedule(learning_rate=1e-4, batch_size=16, epochs=2, sequence_length=384),
    options=(
        TaskOption("doc_stride", int, 128, _DOC_STRIDE),
        TaskOption("max_query_length", int, 64, "question tokens kept"),
        TaskOption("n_best_size", int, 20, "candidates kept per question", run_setting=False),
        TaskOption("max_answer_length", int, 30, "longest answer, in tokens", run_setting=False),
    ),
    prediction_file="predictions.json",
    serving_outputs=("start_logits", "end_logits", "answer_start", "answer_end", "answer_text"),
    pair_input=True,
    pooler=False,
    huggingface=HuggingFaceHead(
        "BertForQuestionAnswering",
        classifier_rows("span_head", "qa_outputs"),
        pooler=False,
        settings=frozenset(),
    ),
    sequence_outputs=True,
    serving="spans",
)
