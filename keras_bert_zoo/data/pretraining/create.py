"""`create_pretraining_data`: text files to TFRecord shards of MLM + NSP instances.

The orchestrator behind `kbz create-pretraining-data` (whose flags, google-research/bert's,
live in `keras_bert_zoo.cli`): read and tokenize the input files in parallel, build
`dupe_factor` passes of instances per file (`instances`), serialize and shuffle them
(`records`), and write the shards atomically. Output is deterministic for a seed and does
not depend on the number of workers.

>>> stats = create_pretraining_data("corpus.txt", "out.tfrecord@4", preset="bert_tiny_en_uncased")
"""

import logging
from collections.abc import Callable

from keras_bert_zoo.data.pretraining import records, text
from keras_bert_zoo.data.pretraining.instances import InstanceConfig
from keras_bert_zoo.saving.ownership import check_apart
from keras_bert_zoo.saving.vocabulary import load_vocabulary

logger = logging.getLogger(__name__)

TokenizeLines = Callable[[list], list]


def create_pretraining_data(
    input_file,
    output_file,
    vocab_file=None,
    do_lower_case=None,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    random_seed: int = 12345,
    dupe_factor: int = 10,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    do_whole_word_mask: bool = False,
    preset=None,
    input_format: str = "sentence_per_line",
    num_workers=None,
    tokenize_lines: TokenizeLines | None = None,
) -> dict:
    """Text files -> TFRecord shards of BERT pretraining instances (deterministic per seed).

    `input_file`: comma-separated paths/globs (or a list); `output_file`: comma-separated
    paths (or a list), or `path@N` for N shards `path-0000i-of-0000N`. Vocabulary from
    `vocab_file` or `preset`; `tokenize_lines(list[str]) -> list[list[int]]` overrides the
    tokenizer. Returns counts: {"documents", "instances", "output_files", ...}.

    >>> create_pretraining_data("wiki.txt", "out@2", vocab_file="vocab.txt", dupe_factor=5)
    """
    config = InstanceConfig(
        max_seq_length,
        max_predictions_per_seq,
        masked_lm_prob,
        short_seq_prob,
        bool(do_whole_word_mask),
    )
    if dupe_factor < 1:
        raise ValueError(f"--dupe_factor={dupe_factor} must be >= 1.")
    inputs = text.expand_input_patterns(input_file)
    outputs = records.expand_output_files(output_file, inputs)
    check_apart({"--output_file": outputs}, {"--vocab_file": vocab_file, "--preset": preset})
    vocab_path, lowercase = text.resolve_vocabulary(vocab_file, preset, do_lower_case)
    vocab = text.vocabulary_info(load_vocabulary(vocab_path), lowercase, str(vocab_path))
    records.check_writable(outputs)
    tokenize_lines = tokenize_lines or text.default_tokenize_lines(vocab_path, lowercase)
    by_file = text.read_and_tokenize(
        inputs, tokenize_lines, vocab, input_format, max_seq_length, num_workers
    )
    instances = records.serialized_instances(
        by_file, config, vocab, dupe_factor, random_seed, num_workers, ", ".join(inputs)
    )
    records.write_instance_files(instances, outputs)
    documents = sum(map(len, by_file))
    logger.info(
        "Wrote %d instances from %d documents to %d file(s).",
        len(instances),
        documents,
        len(outputs),
    )
    return {
        "input_files": len(inputs),
        "documents": documents,
        "instances": len(instances),
        "output_files": outputs,
    }
