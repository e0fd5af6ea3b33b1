"""Rebuilds this folder's pretraining text from the original public files (maintainers only).

Writes sentence-per-line text with a blank line between documents (google-research/bert's
`create_pretraining_data.py` input format): Gutenberg chapters and WikiText-2 articles are the
documents; paragraphs are split into sentences with `keras_bert_zoo.data.pretraining.text`.

    python examples/data/pretraining/prepare.py /path/to/data
"""

import argparse
import re
from pathlib import Path

from keras_bert_zoo.data.pretraining.text import split_sentences

HERE = Path(__file__).resolve().parent
BOOKS = {"pg11.txt": None, "pg1661.txt": 6}  # file -> chapters kept (None: all)
_CHAPTER = re.compile(r"^(CHAPTER|ADVENTURE|[IVXLC]+\.)\b")
_WIKI_TITLE = re.compile(r"^ = [^=].* = $")
_WIKI_JOINS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))


def _paragraphs(lines):
    paragraph = []
    for line in lines + [""]:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            yield " ".join(paragraph)
            paragraph = []


def gutenberg_documents(path: Path, max_chapters):
    """Chapters (headings and decoration dropped) as lists of sentences."""
    documents = [[]]
    for paragraph in _paragraphs(path.read_text(encoding="utf-8").splitlines()):
        if _CHAPTER.match(paragraph):
            documents.append([])
        elif paragraph.strip("* "):
            documents[-1].extend(split_sentences(paragraph.replace("_", "")))
    documents = [d for d in documents if len(d) > 1]
    return documents[:max_chapters] if max_chapters else documents


def _wiki_text(line: str) -> str:
    for marker, joined in _WIKI_JOINS:
        line = line.replace(marker, joined)
    line = re.sub(r" ([.,;:!?)\]%])", r"\1", line)
    return re.sub(r"([(\[$]) ", r"\1", line).strip()


def wikitext_documents(path: Path):
    """Articles (section headings dropped) as lists of sentences."""
    documents = [[]]
    for line in path.read_text(encoding="utf-8").splitlines():
        if _WIKI_TITLE.match(line):
            documents.append([])
        elif line.strip() and not line.strip().startswith("= "):
            documents[-1].extend(split_sentences(_wiki_text(line)))
    return [d for d in documents if len(d) > 1]


def write(documents, path: Path) -> None:
    path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    print(
        f"{path.name}: {len(documents)} documents, "
        f"{sum(map(len, documents))} sentences, {path.stat().st_size:,} bytes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="folder with gutenberg/ and wikitext-2-raw/")
    args = parser.parse_args()
    books = [
        d
        for name, chapters in BOOKS.items()
        for d in gutenberg_documents(args.data / "gutenberg" / name, chapters)
    ]
    write(books, HERE / "gutenberg.txt")
    write(
        wikitext_documents(args.data / "wikitext-2-raw" / "wiki.valid.raw"),
        HERE / "wikitext2_valid.txt",
    )


if __name__ == "__main__":
    main()
