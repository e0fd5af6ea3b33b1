"""Pretraining text input: vocabulary, documents of sentences, sentence splitting, tokenizing.

Documents are lists of sentences; after tokenizing, each sentence is an int32 id array.
Local files are read with plain Python, remote ones (gs://, hdfs://: any `scheme://`) through
`tf.io.gfile`, which needs TensorFlow; tokenizing takes `kbz.BertTokenizer` on any backend.

>>> [documents] = read_and_tokenize(["wiki.txt"], tokenize_lines, vocabulary_info(tokens))
"""

import concurrent.futures
import dataclasses
import glob
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from keras_bert_zoo.data.readers import gunzip
from keras_bert_zoo.extras import TF_RECORDS, require_tensorflow
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.saving.vocabulary import is_uncased, load_vocabulary
from keras_bert_zoo.tokenization import BertTokenizer

logger = logging.getLogger(__name__)

INPUT_FORMATS = ("sentence_per_line", "raw")
_BATCH_LINES = 8192
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof rev hon gen col capt lt sgt mt vs etc e.g i.e cf no nos vol "
    "fig op co inc ltd jan feb mar apr jun jul aug sep sept oct nov dec approx".split()
)
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+[」』”’]?\s*")


@dataclasses.dataclass(frozen=True)
class VocabularyInfo:
    """Per-id lookups that masking needs (from a token list)."""

    tokens: list
    cls_id: int
    sep_id: int
    mask_id: int
    unselectable: np.ndarray  # bool [vocabulary]: [PAD], [CLS], [SEP], [MASK]
    is_subword: np.ndarray  # bool [vocabulary]: "##" continuation pieces
    random_ids: np.ndarray  # ids a random replacement may take (no bracketed tokens)


def vocabulary_info(
    tokens: list, lowercase: bool | None = None, source: str = "vocabulary"
) -> VocabularyInfo:
    """Checks the special tokens and, if `lowercase` is given, the casing.

    >>> info = vocabulary_info(load_vocabulary("vocab.txt"), lowercase=True)
    """
    index = {token: i for i, token in enumerate(tokens)}
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in index]
    if missing:
        raise ValueError(
            f"{source}: no {', '.join(missing)} token; this is not a BERT "
            "WordPiece vocabulary (--vocab_file / --preset)."
        )
    bracketed = np.array([t.startswith("[") and t.endswith("]") for t in tokens])
    if lowercase is False and is_uncased(tokens):
        raise ValueError(
            f"{source} is uncased (no uppercase tokens) but lowercasing is off; "
            "pass --do_lower_case=true or a cased vocabulary."
        )
    unselectable = np.zeros(len(tokens), bool)
    unselectable[[index[t] for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]") if t in index]] = True
    return VocabularyInfo(
        tokens,
        index["[CLS]"],
        index["[SEP]"],
        index["[MASK]"],
        unselectable,
        np.array([t.startswith("##") for t in tokens]),
        np.flatnonzero(~bracketed).astype(np.int32),
    )


def resolve_vocabulary(vocab_file, preset, do_lower_case) -> tuple:
    """(vocabulary path, lowercase) from `--vocab_file`/`--preset`/`--do_lower_case`."""
    if preset is None:
        if vocab_file is None:
            raise ValueError("Pass --vocab_file (a vocab.txt) or --preset (a preset name).")
        if not Path(vocab_file).is_file():
            raise FileNotFoundError(f"--vocab_file {vocab_file} does not exist.")
        return Path(vocab_file), True if do_lower_case is None else bool(do_lower_case)
    config = load_preset_config(preset)
    tokens = load_vocabulary(config.vocabulary_path)
    if vocab_file is not None and load_vocabulary(vocab_file) != tokens:
        raise ValueError(
            f"--vocab_file {vocab_file} differs from preset '{preset}''s "
            f"vocabulary {config.vocabulary_path}; pass only one of them."
        )
    if do_lower_case is not None and bool(do_lower_case) != config.lowercase:
        raise ValueError(
            f"--do_lower_case={do_lower_case} contradicts preset '{preset}' "
            f"(lowercase={config.lowercase}); drop --do_lower_case."
        )
    if len(tokens) != config.architecture["vocabulary_size"]:
        raise ValueError(
            f"Preset '{preset}': {len(tokens)} vocabulary tokens but "
            f"vocabulary_size {config.architecture['vocabulary_size']}."
        )
    return config.vocabulary_path, config.lowercase


def split_sentences(paragraph: str) -> list:
    """Rule-based sentence splitter for running text (English punctuation, CJK 。！？).

    >>> split_sentences("Mr. Holmes sat. He smiled! 'Why?' she asked. Then rain.")
    ['Mr. Holmes sat.', 'He smiled!', "'Why?' she asked.", 'Then rain.']
    """
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        following = paragraph[match.end() :].lstrip("\"'“‘([")[:1]
        if not following:
            break
        if match.group()[0] in ".!?":
            if not (following.isupper() or following.isdigit()):
                continue
            words = paragraph[start : match.start()].split()
            word = words[-1].lower() if words else ""
            if match.group()[0] == "." and (
                word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())
            ):
                continue
        sentences.append(paragraph[start : match.end()].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    return [s for s in sentences if s] + ([tail] if tail else [])


def documents_from_lines(lines: Iterable, input_format: str = "sentence_per_line") -> list:
    """Documents of (line number, sentence) from lines of text.

    `sentence_per_line`: a blank line ends a document. `raw`: a blank line ends a paragraph
    (its wrapped lines are joined and split into sentences); 2+ blank lines end a document.
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"--input_format={input_format!r}; use one of {INPUT_FORMATS}.")
    documents, paragraph, blanks = [[]], [], 0
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if input_format == "sentence_per_line":
            if line:
                documents[-1].append((number, line))
            elif documents[-1]:
                documents.append([])
            continue
        if line:
            if blanks >= 2 and documents[-1]:
                documents.append([])
            paragraph.append((number, line))
            blanks = 0
            continue
        blanks += 1
        if paragraph:
            joined = " ".join(text for _, text in paragraph)
            documents[-1].extend((paragraph[0][0], s) for s in split_sentences(joined))
            paragraph = []
    if paragraph:
        joined = " ".join(text for _, text in paragraph)
        documents[-1].extend((paragraph[0][0], s) for s in split_sentences(joined))
    return [document for document in documents if document]


def _gfile(path: str):
    """`tf.io.gfile` for a remote path (`scheme://`), None for a local one: TensorFlow is
    imported only where a remote file asks for it, never on JAX or PyTorch with local files."""
    if "://" not in str(path):
        return None
    return require_tensorflow(f"Reading {str(path).split('://')[0]}:// paths").io.gfile


def _isdir(path: str) -> bool:
    gfile = _gfile(path)
    return gfile.isdir(path) if gfile else os.path.isdir(path)


def read_text(path: str) -> str:
    """A UTF-8 text file's content (gzip read transparently, whatever its name)."""
    gfile = _gfile(path)
    with gfile.GFile(path, "rb") if gfile else open(path, "rb") as handle:
        content = gunzip(handle.read())
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error}).") from error


def expand_input_patterns(patterns, flag: str = "--input_file") -> list:
    """Sorted files matching comma-separated paths/globs (or a list of them); `flag` names
    where they came from in the error for a pattern that matches nothing."""
    if isinstance(patterns, (str, os.PathLike)):
        patterns = str(patterns).split(",")
    files = []
    for pattern in (str(p).strip() for p in patterns):
        gfile = _gfile(pattern)
        found = gfile.glob(pattern) if gfile else glob.glob(pattern)
        matches = sorted(m for m in found if not _isdir(m))
        if pattern and _isdir(pattern):
            raise FileNotFoundError(
                f"{flag}: {pattern} is a directory; expected text files (paths or globs, "
                f"e.g. {flag} '{pattern.rstrip('/')}/*.txt')."
            )
        if not pattern or not matches:
            raise FileNotFoundError(f"{flag}: no file matches {pattern!r}.")
        files.extend(m for m in matches if m not in files)
    return files


def default_tokenize_lines(vocab_path, lowercase: bool) -> Callable:
    """`kbz.BertTokenizer` as a thread-safe `tokenize_lines` (lines -> RaggedTensor of ids), in
    a TensorFlow graph (`kbz create-pretraining-data`, which writes TFRecords)."""
    tf = require_tensorflow(TF_RECORDS)
    tokenizer = BertTokenizer(vocabulary=str(vocab_path), lowercase=lowercase)
    graph = tf.function(tokenizer, input_signature=[tf.TensorSpec([None], tf.string)])
    return lambda lines: graph(tf.constant(list(lines), tf.string))


def ids_as_arrays(tokenized) -> list:
    """A RaggedTensor (the graph tokenizer's) or a list of id lists or arrays (the host
    tokenizer's, `tokenization.host`) -> list of int32 arrays."""
    if hasattr(tokenized, "row_splits"):
        flat = np.asarray(tokenized.flat_values, dtype=np.int32)
        return np.split(flat, np.asarray(tokenized.row_splits)[1:-1])
    return [np.asarray(ids, dtype=np.int32).reshape(-1) for ids in tokenized]


def tokenize_documents(
    documents: list,
    tokenize_lines: Callable,
    vocab: VocabularyInfo,
    max_seq_length: int,
    source: str,
) -> list:
    """Tokenizes in batches; drops lines with no tokens; warns about lines to be truncated.
    `tokenize_lines`: a `kbz.BertTokenizer` (any backend) or a callable giving id lists."""
    lines = [sentence for document in documents for _, sentence in document]
    ids = []
    for start in range(0, len(lines), _BATCH_LINES):
        ids.extend(ids_as_arrays(tokenize_lines(lines[start : start + _BATCH_LINES])))
    largest = max((int(a.max()) for a in ids if len(a)), default=-1)
    if largest >= len(vocab.tokens) or len(ids) != len(lines):
        raise ValueError(
            f"{source}: the tokenizer gave id {largest} (or a wrong count) for a "
            f"vocabulary of {len(vocab.tokens)}; tokenizer and vocabulary differ."
        )
    numbers = [number for document in documents for number, _ in document]
    long = [n for n, a in zip(numbers, ids, strict=True) if len(a) > max_seq_length - 3]
    if long and len(long) * 2 > len(lines):
        raise ValueError(
            f"{source}: {len(long)} of {len(lines)} lines are longer than "
            f"--max_seq_length={max_seq_length} tokens (e.g. line {long[0]}). "
            "Expected one sentence per line; for running text pass "
            "--input_format raw, or raise --max_seq_length."
        )
    if long:
        logger.warning(
            "%s: %d line(s) longer than max_seq_length=%d will be truncated (e.g. line %d).",
            source,
            len(long),
            max_seq_length,
            long[0],
        )
    pieces, result = iter(ids), []
    for document in documents:
        sentences = [a for a in (next(pieces) for _ in document) if len(a)]
        if sentences:
            result.append(sentences)
    return result


def _load_file(path: str, tokenize_lines, vocab, input_format, max_seq_length) -> list:
    documents = documents_from_lines(read_text(path).split("\n"), input_format)
    documents = tokenize_documents(documents, tokenize_lines, vocab, max_seq_length, path)
    if not documents:
        raise ValueError(
            f"{path} has no text (empty or blank lines only); remove it from --input_file."
        )
    single = sum(len(document) == 1 for document in documents)
    if single:
        logger.info("%s: %d of %d documents have one sentence.", path, single, len(documents))
    return documents


def read_and_tokenize(
    files: list,
    tokenize_lines: Callable,
    vocab: VocabularyInfo,
    input_format: str = "sentence_per_line",
    max_seq_length: int = 128,
    num_workers: int | None = None,
) -> list:
    """Documents of each file (a list per file), read and tokenized in parallel threads."""
    workers = max(1, min(len(files), num_workers or os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        loads = pool.map(
            lambda p: _load_file(p, tokenize_lines, vocab, input_format, max_seq_length), files
        )
        return list(tqdm(loads, total=len(files), desc="tokenize", unit="file", disable=None))
