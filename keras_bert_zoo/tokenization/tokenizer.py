"""BERT WordPiece tokenizer: a Keras layer with two implementations of the same ids.

>>> tok = BertTokenizer.from_preset("bert_base_en_uncased")
>>> tok(["Hello world!"])                      # ids without special tokens, one row per text

Ids and offsets equal those of the original BERT tokenization as `tokenizers` implements it
(`BertWordPieceTokenizer(vocabulary, lowercase=L)`) on any text, with no known difference: see
`normalization.py` for how, tests/test_tokenization.py and tools/check_tokenizer_parity.py for
the evidence. Like `tokenizers`, special tokens written in the text ("[MASK]") become their
ids; Google's original code reads them as plain text: `special_tokens_in_strings=False`
(advisable for untrusted text, which could otherwise insert [SEP]).

Which implementation runs (`uses_graph`):
- TensorFlow ops (`graph.py`: ragged int32 tensors) for TensorFlow inputs (tf.data,
  tf.function, SavedModel export; no `tf.py_function`) and for every input when Keras runs on
  TensorFlow;
- Hugging Face `tokenizers` and numpy (`host.py`: int32 arrays, lists of them for batches)
  for Python and numpy strings when Keras runs on JAX or PyTorch, inside `on_host()` on any
  backend (the jobs' numpy helpers in `arrays.py`: the graph's first call spends longer
  tracing than the host takes to tokenize a corpus), and always where
  TensorFlow or tensorflow-text is not installed (the base install).

Invalid UTF-8 is read as U+FFFD, which BERT's cleaning drops (like `bytes.decode("utf-8",
"replace")` before `tokenizers`). Empty or blank text gives no tokens, so `[CLS] [SEP]` packed.
"""

import contextlib
import contextvars
import functools
import os
import sys

import keras

from keras_bert_zoo.extras import require_tensorflow, tensorflow_installed
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.saving.vocabulary import load_vocabulary
from keras_bert_zoo.tokenization.host import HostWordPiece


@functools.cache
def graph_ops():
    """`tokenization.graph` (the TensorFlow ops), or None without tensorflow-text. Imported on
    first use: on JAX and PyTorch, Python strings never import TensorFlow, installed or not."""
    if not tensorflow_installed():
        return None
    from keras_bert_zoo.tokenization import graph  # TensorFlow only where it is wanted

    return graph


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


_ON_HOST = contextvars.ContextVar("kbz_tokenize_on_host", default=False)


@contextlib.contextmanager
def on_host():
    """Python and numpy strings go to `tokenizers` and numpy inside this block, on any backend
    (TensorFlow tensors still go to the graph). The ids and offsets are the same either way.

    >>> with on_host():
    ...     ids = tokenizer(["a sentence"])  # a list of int32 arrays, also on TensorFlow
    """
    token = _ON_HOST.set(True)
    try:
        yield
    finally:
        _ON_HOST.reset(token)


def uses_graph(*inputs) -> bool:
    """Whether the TensorFlow graph tokenizes `inputs` (else `tokenizers` and numpy): for
    TensorFlow tensors (tf.data, tf.function) and whenever Keras runs on TensorFlow, unless
    inside `on_host()`."""
    tf = sys.modules.get("tensorflow")  # a TensorFlow tensor means TensorFlow is imported
    if tf is not None and any(isinstance(x, (tf.Tensor, tf.RaggedTensor)) for x in inputs):
        if graph_ops() is None:
            require_tensorflow("Tokenizing TensorFlow tensors", "tensorflow_text")
        return True
    if _ON_HOST.get():
        return False
    return keras.backend.backend() == "tensorflow" and graph_ops() is not None


def _vocabulary_source(vocabulary, tokens):
    name = vocabulary if isinstance(vocabulary, (str, os.PathLike)) else "<list>"
    return f"vocabulary={name} ({len(tokens)} tokens)"


def check_vocabulary_size(tokenizer_or_vocabulary, vocabulary_size):
    """Raises ValueError unless the tokenizer's (or vocabulary's) size is `vocabulary_size`,
    the encoder's embedding rows."""
    if isinstance(tokenizer_or_vocabulary, BertTokenizer):
        size = tokenizer_or_vocabulary.vocabulary_size()
    else:
        size = len(load_vocabulary(tokenizer_or_vocabulary))
    if size != vocabulary_size:
        raise ValueError(
            f"The vocabulary has {size} tokens but the encoder's `vocabulary_size` is "
            f"{vocabulary_size}. Received: vocabulary_size={vocabulary_size}. Use the vocabulary "
            "the encoder was trained with (or build the encoder with vocabulary_size="
            f"{size})."
        )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenizer(keras.layers.Layer):
    """BERT WordPiece tokenizer: text to int32 ids without special tokens.

    Args:
        vocabulary: path of a vocab.txt (one token a line) or a list of tokens. It must hold
            [PAD], [UNK], [CLS], [SEP] and [MASK].
        lowercase: lowercase and strip accents (uncased and Chinese vocabularies); False for
            cased and multilingual ones. Default True, as in `tokenizers` and Google's BERT.
        special_tokens_in_strings: map the five special tokens written literally in the text
            ("[MASK]") to their ids, as `tokenizers` does (default). False reads them as plain
            text, as Google's original BERT code.

    Calling it maps a string to a 1-D tensor of ids, a batch [batch] to a ragged
    [batch, (tokens)], and pre-split words [batch, (words)] (ragged or dense) to
    [batch, (words), (pieces)], which aligns word-level labels (NER) to sub-words. Off
    TensorFlow (see `uses_graph`) the same ids come as an int32 array, a list of arrays and a
    list of lists of arrays.
    """

    def __init__(self, vocabulary, lowercase=True, special_tokens_in_strings=True, **kwargs):
        super().__init__(**kwargs)
        self._convert_input_args = False  # strings stay strings (tf or numpy)
        self._allow_non_tensor_positional_args = True  # Python strings and lists
        self.built = True
        tokens = load_vocabulary(vocabulary)
        self.vocabulary = tokens
        self.lowercase = bool(lowercase)
        self.special_tokens_in_strings = bool(special_tokens_in_strings)
        self._token_to_id = {token: index for index, token in enumerate(tokens)}  # last wins
        for token in SPECIAL_TOKENS:
            if token not in self._token_to_id:
                raise ValueError(
                    f"`vocabulary` is missing required special token '{token}'. Received: "
                    f"{_vocabulary_source(vocabulary, tokens)}. Use an original BERT vocabulary,"
                    " which holds [PAD], [UNK], [CLS], [SEP], [MASK]."
                )
        (
            self.pad_token_id,
            self.unk_token_id,
            self.cls_token_id,
            self.sep_token_id,
            self.mask_token_id,
        ) = (self._token_to_id[t] for t in SPECIAL_TOKENS)

    def special_token_ids(self) -> list:
        """Ids of [PAD], [UNK], [CLS], [SEP], [MASK], in that order."""
        return [self._token_to_id[t] for t in SPECIAL_TOKENS]

    def specials_in_text(self) -> tuple:
        """The special tokens read as such when written in the text."""
        return SPECIAL_TOKENS if self.special_tokens_in_strings else ()

    def _implementation(self, *inputs):
        """The graph or host tokenizer for `inputs`, built on first use (untracked)."""
        on_graph = uses_graph(*inputs)
        key = "_graph_wordpiece" if on_graph else "_host_wordpiece"
        if key not in self.__dict__:
            self.__dict__[key] = (graph_ops().GraphWordPiece if on_graph else HostWordPiece)(self)
        return self.__dict__[key]

    @classmethod
    def from_preset(cls, name_or_dir, **kwargs):
        """The tokenizer of a named preset or a preset directory (its vocabulary and casing)."""
        config = load_preset_config(name_or_dir)
        kwargs = {"lowercase": config.lowercase, **kwargs}
        tokenizer = cls(vocabulary=config.vocabulary_path, **kwargs)
        check_vocabulary_size(tokenizer, config.architecture["vocabulary_size"])
        return tokenizer

    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_vocabulary(self):
        return list(self.vocabulary)

    def id_to_token(self, token_id):
        return self.vocabulary[token_id]

    def token_to_id(self, token):
        return self._token_to_id[token]

    def call(self, inputs):
        return self._implementation(inputs).apply(inputs, offsets=None)[0]

    def tokenize(self, inputs):
        return self(inputs)

    def tokenize_with_offsets(self, inputs, unit="byte"):
        """(ids, starts, ends): each token's span `text[start:end]` in the input string, in
        bytes of its UTF-8 (`unit="byte"`, tf.strings.substr style) or in code points
        (`unit="char"`, Python `str` indices, as SQuAD's answer_start). The spans are those of
        `tokenizers`' offsets; pieces of one character (Hangul jamo) share its span. For
        pre-split words [batch, (words)], spans are into each word."""
        if unit not in ("byte", "char"):
            raise ValueError(f"`unit` must be 'byte' or 'char'. Received: unit={unit!r}")
        return self._implementation(inputs).apply(inputs, offsets=unit)

    def detokenize(self, ids, skip_special_tokens=True):
        """Ids [tokens] or [batch, (tokens)] (ragged or dense, e.g. packed `token_ids`) back to
        text, as `tokenizers`' `decode`: "##" pieces glued to the previous token, other tokens
        space-separated, its punctuation cleanup, and special tokens (with [UNK]) skipped.
        A tf.string tensor from the graph, a `str` (one row) or list of `str` off it."""
        return self._implementation(ids).detokenize(ids, skip_special_tokens)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": self.get_vocabulary(),
                "lowercase": self.lowercase,
                "special_tokens_in_strings": self.special_tokens_in_strings,
            }
        )
        return config
