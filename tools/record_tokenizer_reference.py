"""Re-records what the tokenizer is checked against, from Hugging Face `tokenizers`.

Two outputs, both derived from `tokenizers.BertWordPieceTokenizer` (the reference for
`keras_bert_zoo.BertTokenizer`):

* `--tables`: `keras_bert_zoo/_unicode_tables.py`, the per-character behaviour of
  `BertNormalizer` (clean_text, handle_chinese_chars, strip_accents, lowercase; for the
  lowercasing one in three steps around NFD's reordering, with the combining classes its NFD
  sorts by) and of `BertPreTokenizer`, found by running every Unicode code point through them.
  The tables are recorded rather than derived from Python's `unicodedata`, because `tokenizers`
  mixes Unicode versions (its control/punctuation/mark tables are older than its NFD and its
  lowercasing) and Python's version differs between interpreters.
* `--fixture`: `tests/fixtures/tokenization/reference_ids.json.gz`, the ids `tokenizers` gives
  every line of the text in `tests/data/` for the four bundled vocabularies, with provenance.

Usage (needs `pip install -e ".[test]"`):

    python tools/record_tokenizer_reference.py            # both
    python tools/record_tokenizer_reference.py --tables   # only the tables
"""

import argparse
import datetime
import gzip
import hashlib
import json
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import BertWordPieceTokenizer, normalizers, pre_tokenizers

ROOT = Path(__file__).resolve().parent.parent
TABLES = ROOT / "keras_bert_zoo" / "_unicode_tables.py"
FIXTURE = ROOT / "tests" / "fixtures" / "tokenization" / "reference_ids.json.gz"
VOCABULARIES = {"uncased": True, "cased": False, "multi_cased": False, "chinese": True}


def _vocab_path(name):
    return ROOT / "keras_bert_zoo" / "presets" / "bundled" / "vocab" / f"{name}.txt"


# --- tables ------------------------------------------------------------------------------------


def _run_kind(code_point, output):
    """How one code point normalizes: (kind, delta); see tokenization/normalization.py."""
    if output == "":
        return "d", 0
    if output == " ":
        return "s", 0
    if len(output) == 1:
        return "k", ord(output) - code_point
    if len(output) == 3 and output[0] == output[2] == " ":
        return "c", ord(output[1]) - code_point
    syllable = code_point - 0xAC00
    if 0 <= syllable < 11172:
        jamo = chr(0x1100 + syllable // 588) + chr(0x1161 + syllable % 588 // 28)
        jamo += chr(0x11A7 + syllable % 28) if syllable % 28 else ""
        if output == jamo:
            return "h", 0
    return "m", 0


def _code_points():
    return (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def _runs(kinds, default):
    """Run-length encodes {code point: (kind, delta)} as '<hex start><kind>[<delta>]' words;
    `default` is for surrogates, which cannot occur in decoded text."""
    words, previous = [], None
    for code_point in range(0x110000):
        kind = kinds.get(code_point, default)
        if kind != previous:
            words.append(f"{code_point:X}{kind[0]}{kind[1] or ''}")
            previous = kind
    return " ".join(words)


def _wrap(name, text, width=94):
    lines = [text[i : i + width] for i in range(0, len(text), width)] or [""]
    body = "\n".join(f'    "{line}"' for line in lines)
    return f"{name} = (\n{body}\n)\n"


def _normalizer(**kwargs):
    options = dict(clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    return normalizers.BertNormalizer(**{**options, **kwargs})


def _combining_classes(nfd):
    """{code point: canonical combining class} as `tokenizers`' NFD orders marks, probed by
    placing each character before and after reference marks (NFD swaps two adjacent marks
    exactly when the first has the higher nonzero class)."""

    def swaps(first, second):
        return first != second and nfd.normalize_str("a" + first + second) == "a" + second + first

    references = {}  # class -> a mark NFD gives that class (Python's table, checked against NFD)
    for code_point in _code_points():
        value = unicodedata.combining(chr(code_point))
        if (
            value
            and value not in references
            and nfd.normalize_str(chr(code_point)) == chr(code_point)
        ):
            if (value > 220) == swaps(chr(code_point), "\u0316") and (0 < value < 220) == swaps(
                "\u0316", chr(code_point)
            ):
                references[value] = chr(code_point)
    classes = {}
    for code_point in _code_points():
        char = chr(code_point)
        if nfd.normalize_str(char) != char:
            continue  # decomposes: never present after NFD
        if not (swaps(char, "\u0316") or swaps("\u0316", char) or swaps("\u0301", char)):
            continue  # class 0
        above = [v for v, mark in references.items() if swaps(char, mark)]
        below = [v for v, mark in references.items() if swaps(mark, char)]
        equal = set(references) - set(above) - set(below)
        # Keys keep the order: 2 * class, or between two known classes for an unknown one.
        classes[code_point] = 2 * equal.pop() if equal else 2 * max(above, default=0) + 1
    return classes


def record_tables():
    """Probes every code point. Uncased normalization is recorded in three steps, because NFD
    reorders combining marks across characters: DECOMPOSE (clean_text, CJK spacing and NFD of
    one character), COMBINING_CLASSES (the sort keys of NFD's canonical reordering), FINISH
    (dropping non-spacing marks and lowercasing one character of NFD output)."""
    nfd = normalizers.NFD()
    tables, multi = {}, {}
    probes = {
        "CASED": _normalizer(),
        "UNCASED_DECOMPOSE": normalizers.Sequence([_normalizer(), nfd]),
        "UNCASED_FINISH": _normalizer(
            clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=True
        ),
    }
    for name, normalizer in probes.items():
        kinds = {}
        for code_point in _code_points():
            char = chr(code_point)
            if name == "UNCASED_FINISH" and nfd.normalize_str(char) != char:
                kinds[code_point] = ("k", 0)  # never present after NFD
                continue
            output = normalizer.normalize_str(char)
            kinds[code_point] = _run_kind(code_point, output)
            if kinds[code_point][0] == "m":
                multi[code_point] = output
                assert name == "UNCASED_DECOMPOSE" and len(output) <= 4, (name, hex(code_point))
        tables[name] = _runs(kinds, ("d", 0))
    classes = _combining_classes(nfd)
    tables["COMBINING_CLASSES"] = _runs({c: ("k", v) for c, v in classes.items()}, ("k", 0))
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    kinds = {}
    for code_point in _code_points():
        pieces = len(pre_tokenizer.pre_tokenize_str("a" + chr(code_point) + "a"))
        kinds[code_point] = ({1: "o", 2: "w", 3: "p"}[pieces], 0)
    tables["PRETOKENIZER"] = _runs(kinds, ("o", 0))
    tables["UNCASED_MULTI"] = " ".join(
        f"{c:X}:" + ",".join(f"{ord(ch):X}" for ch in out) for c, out in sorted(multi.items())
    )
    header = f"""Per-character tables of BERT normalization and pre-tokenization (GENERATED).

Recorded from tokenizers=={tokenizers.__version__} by
`python tools/record_tokenizer_reference.py --tables`; do not edit. That runs every code point
through BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
lowercase=L), its steps, NFD and BertPreTokenizer (see the tool).

A table is a sequence of runs '<first code point, upper-case hex><kind>[<delta>]'; a run lasts
until the next one starts. Normalizer kinds: k keep as code point + delta, d drop, s replace
by a space, c CJK: space, code point + delta, space; h Hangul syllable: its NFD jamo; m several
characters, listed in UNCASED_MULTI ('<cp>:<out>,<out>...'). Pre-tokenizer kinds: o other,
w whitespace, p punctuation. COMBINING_CLASSES: 'k<key>', NFD's sort key (2 x class).
"""
    source = f'"""{header}"""\n\nTOKENIZERS_VERSION = "{tokenizers.__version__}"\n'
    for name in (
        "CASED",
        "UNCASED_DECOMPOSE",
        "UNCASED_MULTI",
        "COMBINING_CLASSES",
        "UNCASED_FINISH",
        "PRETOKENIZER",
    ):
        source += "\n" + _wrap(name, tables[name])
    TABLES.write_text(source)
    print(f"wrote {TABLES.relative_to(ROOT)} ({len(source)} bytes)")


# --- corpora ----------------------------------------------------------------------------------

# name: (format, glob) under tests/data (TEST_CORPORA) or ../shared/data (FULL_CORPORA).
TEST_CORPORA = {
    "wikitext": ("lines", "wikitext2_valid_head.raw"),
    "gutenberg": ("lines", "gutenberg_*_head.txt"),
    "sst2": ("tsv", "sst2_train_subset.tsv"),
    "wnut17": ("conll", "wnut17_*_head.conll"),
    "squad": ("squad", "squad_v1.1_dev_subset.json"),
    "multilingual": ("lines", "multilingual.txt"),
}
FULL_CORPORA = {
    "wikitext": ("lines", "wikitext-2-raw/wiki.valid.raw"),
    "gutenberg": ("lines", "gutenberg/pg*.txt"),
    "sst2": ("tsv", "sst2/train.tsv"),
    "wnut17": ("conll", "wnut17/*.conll"),
    "squad": ("squad", "squad-v1.1/*.json"),
}


def read_corpus(path, kind):
    """The text lines of one file: non-blank lines, TSV first column (no header), CoNLL
    sentences (tokens joined by spaces), or SQuAD contexts and questions."""
    text = Path(path).read_text(encoding="utf-8")
    if kind == "lines":
        return [line.rstrip("\r") for line in text.split("\n") if line.strip()]
    if kind == "tsv":
        return [row.split("\t")[0] for row in text.split("\n")[1:] if row.strip()]
    if kind == "conll":
        return [" ".join(words) for words in read_conll(path)]
    if kind == "squad":
        lines = []
        for article in json.loads(text)["data"]:
            for paragraph in article["paragraphs"]:
                lines.append(paragraph["context"])
                lines.extend(qa["question"] for qa in paragraph["qas"])
        return lines
    raise ValueError(f"unknown corpus format {kind!r}")


def read_conll(path):
    """Sentences of a CoNLL `token<TAB>tag` file as lists of words."""
    sentences, words = [], []
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        token = line.split("\t")[0].strip()
        if token:
            words.append(line.split("\t")[0])
        elif words:
            sentences.append(words)
            words = []
    return sentences + ([words] if words else [])


def load_corpora(root, layout):
    """{name: lines} for every corpus of `layout` (TEST_CORPORA or FULL_CORPORA) under root."""
    corpora = {}
    for name, (kind, pattern) in layout.items():
        files = sorted(Path(root).glob(pattern))
        if not files:
            raise FileNotFoundError(f"no {pattern} under {root}")
        corpora[name] = [line for path in files for line in read_corpus(path, kind)]
    return corpora


# --- fixture -----------------------------------------------------------------------------------


def record_fixture():
    corpora = load_corpora(ROOT / "tests" / "data", TEST_CORPORA)
    fixture = {
        "what": "BertWordPieceTokenizer(vocabulary, lowercase=L).encode(line, "
        "add_special_tokens=False).ids of every line of the text in tests/data",
        "tokenizers_version": tokenizers.__version__,
        "recorded": datetime.date.today().isoformat(),
        "lines": corpora,
        "vocabularies": {},
    }
    for vocab, lowercase in VOCABULARIES.items():
        path = _vocab_path(vocab)
        reference = BertWordPieceTokenizer(str(path), lowercase=lowercase)
        fixture["vocabularies"][vocab] = {
            "vocabulary": str(path.relative_to(ROOT)),
            "vocabulary_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "lowercase": lowercase,
            "ids": {
                name: [e.ids for e in reference.encode_batch(lines, add_special_tokens=False)]
                for name, lines in corpora.items()
            },
        }
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(fixture, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    FIXTURE.write_bytes(gzip.compress(payload, compresslevel=9, mtime=0))
    counts = {name: len(lines) for name, lines in corpora.items()}
    print(
        f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size} bytes): lines {counts} "
        f"x {len(VOCABULARIES)} vocabularies"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", action="store_true", help="only re-record the tables")
    parser.add_argument("--fixture", action="store_true", help="only re-record the fixture")
    args = parser.parse_args(argv)
    both = not (args.tables or args.fixture)
    if args.tables or both:
        record_tables()
    if args.fixture or both:
        record_fixture()


if __name__ == "__main__":
    main()
