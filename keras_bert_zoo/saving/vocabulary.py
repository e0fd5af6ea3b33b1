"""Reading a BERT `vocab.txt`, and its casing: one module for every part of the package.

The tokenizer, pretraining data, presets and checkpoint converters all read vocabularies
here, so they agree on line splitting, trimming and casing. Pure Python (no TensorFlow).
"""

import os
from pathlib import Path

# Characters Rust's `char::is_whitespace` accepts: `tokenizers` trims them from the end of each
# vocabulary line, so trimming the same ones keeps our ids equal to its ids.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _short(value):
    text = repr(value)
    return text if len(text) < 80 else text[:76] + "...]"


def load_vocabulary(vocabulary) -> list:
    """Tokens of a vocab.txt path or of a list of tokens.

    One token a line, split on "\\n" only (a line holding U+2028 is a token, not a line
    break), trailing whitespace trimmed as `tokenizers` does.

    >>> tokens = load_vocabulary("keras_bert_zoo/presets/bundled/vocab/uncased.txt")
    """
    if isinstance(vocabulary, (str, os.PathLike)):
        path = Path(vocabulary)
        if not path.is_file():
            raise ValueError(
                f"`vocabulary` file not found. Received: vocabulary={vocabulary}. "
                "Pass the path of a BERT vocab.txt or a list of tokens."
            )
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                lines = handle.read().split("\n")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"`vocabulary` must be a UTF-8 text file. Received: "
                f"vocabulary={vocabulary} ({error})."
            ) from None
        if not lines[-1]:  # the newline ending the last line
            lines.pop()
        return [line.rstrip(RUST_WHITESPACE) for line in lines]
    if isinstance(vocabulary, (list, tuple)) and all(isinstance(t, str) for t in vocabulary):
        return list(vocabulary)
    raise ValueError(
        "`vocabulary` must be a vocab.txt path or a list of token strings. "
        f"Received: vocabulary={_short(vocabulary)} of type {type(vocabulary)}."
    )


def is_uncased(vocabulary) -> bool:
    """True if no word piece starts with an ASCII capital ("[CLS]"-style tokens aside).

    Google's uncased vocabularies hold no such piece; cased ones hold thousands. (Not "any
    capital": the uncased vocabulary holds "ℝ", which Python calls uppercase.)

    >>> is_uncased("presets/bundled/vocab/uncased.txt")
    True
    """
    tokens = load_vocabulary(vocabulary)
    return not any("A" <= t[:1] <= "Z" for t in tokens if not t.startswith("["))
