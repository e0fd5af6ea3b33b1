"""BertTokenizer: ids and offsets identical to Hugging Face `tokenizers`, bad input, saving.

Real text is checked against a committed fixture of reference ids (re-record it with
tools/record_tokenizer_reference.py); random Unicode is checked live against `tokenizers`.
"""

import functools
import gzip
import hashlib
import json
import random
from pathlib import Path

import hypothesis
import hypothesis.strategies as st
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import TOKENIZER_PATHS, token_rows, tokenizer_path
from tokenizers import BertWordPieceTokenizer

import keras_bert_zoo as kbz
from keras_bert_zoo.saving.vocabulary import load_vocabulary
from keras_bert_zoo.tokenization import BertTokenizer, check_vocabulary_size

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "tokenization" / "reference_ids.json.gz"
VOCABULARIES = {"uncased": True, "cased": False, "multi_cased": False, "chinese": True}


def vocab_path(name):
    return str(kbz.presets.builtin_presets_dir() / "vocab" / f"{name}.txt")


@functools.cache
def tokenizer(name, **kwargs):
    return BertTokenizer(vocab_path(name), lowercase=VOCABULARIES[name], **kwargs)


@functools.cache
def reference(name):
    return BertWordPieceTokenizer(vocab_path(name), lowercase=VOCABULARIES[name])


@functools.cache
def fixture():
    return json.loads(gzip.decompress(FIXTURE.read_bytes()))


def reference_ids_and_offsets(name, lines):
    encodings = reference(name).encode_batch(lines, add_special_tokens=False)
    return [e.ids for e in encodings], [[tuple(o) for o in e.offsets] for e in encodings]


def ours_ids_and_offsets(name, lines, path="graph", **kwargs):
    with tokenizer_path(path):
        inputs = tf.constant(lines) if path == "graph" else list(lines)
        ids, starts, ends = tokenizer(name, **kwargs).tokenize_with_offsets(inputs, unit="char")
    return token_rows(ids), [
        list(zip(s, e, strict=True))
        for s, e in zip(token_rows(starts), token_rows(ends), strict=True)
    ]


def ours_ids(tok, text, path):
    """`tok(text)` on `path` as Python lists."""
    with tokenizer_path(path):
        return token_rows(tok(text))


# --- seeded random Unicode (also used by tools/check_tokenizer_parity.py --random) -----------


def _span(first, last):
    return list(range(first, last + 1))


POOLS = {
    "ascii": [
        ord(c)
        for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    ],
    "accented": _span(0xC0, 0x24F) + _span(0x1E00, 0x1EFF),
    "combining": _span(0x300, 0x36F)
    + _span(0x1AB0, 0x1ACE)
    + _span(0x1DC0, 0x1DFF)
    + _span(0x20D0, 0x20F0)
    + _span(0xFE20, 0xFE2F)
    + _span(0x1D165, 0x1D172),
    "greek_cyrillic": _span(0x370, 0x3FF) + _span(0x400, 0x52F) + _span(0x1F00, 0x1FFF),
    "arabic_hebrew": _span(0x590, 0x6FF) + _span(0xFB1D, 0xFDFF) + _span(0xFE70, 0xFEFC),
    "indic": _span(0x900, 0xDFF),  # Devanagari to Sinhala
    "thai_lao": _span(0xE00, 0xEFF),
    "hangul": _span(0xAC00, 0xD7A3) + _span(0x1100, 0x11FF) + _span(0x3130, 0x318F),
    "cjk": _span(0x4E00, 0x9FFF)
    + _span(0x3400, 0x4DBF)
    + _span(0x20000, 0x2A6DF)
    + _span(0x2A700, 0x2CEAF)
    + _span(0xF900, 0xFAFF)
    + _span(0x2F800, 0x2FA1F)
    + _span(0x3000, 0x30FF)
    + _span(0x2E80, 0x2FDF),
    "emoji": _span(0x1F300, 0x1FAFF)
    + _span(0x2600, 0x27BF)
    + [0x200D, 0xFE0F, 0xFE0E]
    + _span(0x1F1E6, 0x1F1FF),
    "control": _span(0x0, 0x1F) + _span(0x7F, 0x9F),
    "zero_width": _span(0x200B, 0x200F)
    + _span(0x2028, 0x202E)
    + _span(0x2060, 0x206F)
    + [0xFEFF, 0xAD, 0x180E, 0x34F, 0x61C]
    + _span(0xFFF9, 0xFFFD)
    + _span(0xE0000, 0xE007F),
    "whitespace": [
        0x20,
        0x9,
        0xA,
        0xD,
        0xB,
        0xC,
        0x85,
        0xA0,
        0x1680,
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
    ]
    + _span(0x2000, 0x200A),
    "fullwidth": _span(0xFF01, 0xFFEE),
    "symbols": _span(0x2000, 0x2BFF) + _span(0x1D100, 0x1D7FF) + _span(0x2460, 0x24FF),
    "any": None,  # any code point: unassigned, private use, astral planes
}
TRICKY = [
    "İ",
    "ı",
    "ß",
    "ẞ",
    "Σ",
    "ΑΣ",
    "ς",
    "ǅ",
    "ﬁ",
    "½",
    "…",
    "\u212b",
    "\u212a",
    "ŉ",
    "ΐ",
    "\ufffd",
    "[MASK]",
    "[SEP]",
    "[UNK]",
    "[CLS]",
    "[PAD]",
    "[mask]",
    "##",
    "\U0001d15e",
    "\U0001d165\U0001d16d",
    "ǰ",
    "Ⅻ",
    "①",
    "ᾷ\u1dfb",
    "\u0358\u1dfb",
    "a\u0301\u0316",
]


def _char(rng, pool):
    if pool == "any":
        while True:
            code_point = rng.randrange(0x110000 if rng.random() < 0.5 else 0x10000)
            if not 0xD800 <= code_point <= 0xDFFF:
                return chr(code_point)
    return chr(rng.choice(POOLS[pool]))


def _random_word(rng, pieces):
    draw = rng.random()
    if draw < 0.25:  # glued vocabulary pieces, sometimes upper-cased or with a combining mark
        word = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:
            word = word.upper() if rng.random() < 0.5 else word.title()
        if rng.random() < 0.3:
            i = rng.randrange(len(word) + 1)
            word = word[:i] + _char(rng, "combining") + word[i:]
        return word
    if draw < 0.3:
        return rng.choice(TRICKY)
    if draw < 0.34:  # around the 100-character limit
        length = rng.choice([99, 100, 101, rng.randint(90, 140)])
        pool = rng.choice(["letters", "accented", "emoji", "hangul", "cjk"])
        if pool == "letters":
            return "".join(rng.choice("abcdefghij") for _ in range(length))
        return "".join(_char(rng, pool) for _ in range(length))
    pool = rng.choice(list(POOLS))
    chars = []
    for _ in range(rng.randint(1, 10)):
        this = pool if rng.random() < 0.8 else rng.choice(list(POOLS))
        chars.append(_char(rng, this))
        if this in ("accented", "greek_cyrillic", "ascii") and rng.random() < 0.2:
            chars.append(_char(rng, "combining"))
    return "".join(chars)


def random_lines(count, vocabulary, seed):
    """`count` seeded lines of random Unicode words, some glued from the vocabulary's pieces."""
    rng = random.Random(seed)
    pieces = [
        t.removeprefix("##")
        for t in load_vocabulary(vocab_path(vocabulary))
        if t and not t.startswith("[")
    ]
    separators = [" ", " ", " ", "", "\t", "\u3000", "\n", ", ", "\xa0"]
    return [
        "".join(
            _random_word(rng, pieces) + rng.choice(separators) for _ in range(rng.randint(0, 12))
        )
        for _ in range(count)
    ]


# --- parity -----------------------------------------------------------------------------------


def test_fixture_provenance():
    data = fixture()
    assert data["tokenizers_version"]
    for name, entry in data["vocabularies"].items():
        assert entry["lowercase"] == VOCABULARIES[name]
        # (the fixture names the vocabulary's path when it was recorded; its hash is the check)
        digest = hashlib.sha256(Path(vocab_path(name)).read_bytes()).hexdigest()
        assert digest == entry["vocabulary_sha256"], f"{name} vocabulary changed: re-record"
    assert sum(len(lines) for lines in data["lines"].values()) > 3000


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
@pytest.mark.parametrize("name", list(VOCABULARIES))
def test_real_text_ids_equal_reference_fixture(name, path):
    data = fixture()
    for corpus, lines in data["lines"].items():
        expected = data["vocabularies"][name]["ids"][corpus]
        ours = ours_ids(tokenizer(name), tf.constant(lines) if path == "graph" else lines, path)
        different = [i for i, (a, b) in enumerate(zip(ours, expected, strict=True)) if a != b]
        assert not different, (
            f"{corpus}/{name}: {len(different)} of {len(lines)} lines differ,"
            f" first {lines[different[0]]!r}"
        )


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
@pytest.mark.parametrize("name", list(VOCABULARIES))
def test_random_unicode_ids_and_offsets_equal_tokenizers(name, path):
    lines = random_lines(400, name, seed=1234)
    ids, offsets = ours_ids_and_offsets(name, lines, path)
    expected_ids, expected_offsets = reference_ids_and_offsets(name, lines)
    for i, line in enumerate(lines):
        assert ids[i] == expected_ids[i], f"ids differ on {line!r}"
        assert offsets[i] == expected_offsets[i], f"offsets differ on {line!r}"


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(text=st.text(max_size=60), name=st.sampled_from(list(VOCABULARIES)))
@pytest.mark.parametrize("path", TOKENIZER_PATHS)
def test_any_text_ids_and_offsets_equal_tokenizers(path, text, name):
    assert ours_ids_and_offsets(name, [text], path) == reference_ids_and_offsets(name, [text])


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_every_bmp_code_point_equals_tokenizers(name, path):
    """Every BMP code point (and every 17th astral one) inside and between words."""
    code_points = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    code_points += list(range(0x10000, 0x110000, 17))
    lines = [
        " ".join(f"a{chr(c)}b{chr(c)}" for c in code_points[i : i + 16])
        for i in range(0, len(code_points), 16)
    ]
    ids, offsets = ours_ids_and_offsets(name, lines, path)
    expected_ids, expected_offsets = reference_ids_and_offsets(name, lines)
    assert ids == expected_ids
    assert offsets == expected_offsets


def test_examples_from_the_issue():
    tok = tokenizer("uncased")
    ids = tok(["Hello world!", "naïve café"])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert [tok.id_to_token(i) for i in ids[1].numpy()] == ["naive", "cafe"]
    assert tok("Hello world!").numpy().tolist() == ids[0].numpy().tolist()  # unbatched
    # What keras-hub (tf_text's NFKC case folding) gets wrong: ß, ½, … are kept.
    text = "Straße ½ … ﬁ"
    assert (
        tok(text).numpy().tolist()
        == reference("uncased").encode(text, add_special_tokens=False).ids
    )


def test_lowercasing_follows_the_vocabulary():
    assert tokenizer("cased")("Hello").numpy().tolist() == [8667]
    assert tokenizer("uncased")("Hello").numpy().tolist() == [7592]


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
@pytest.mark.parametrize("special_tokens_in_strings", [True, False])
def test_special_tokens_written_in_text(special_tokens_in_strings, path):
    tok = tokenizer("uncased", special_tokens_in_strings=special_tokens_in_strings)
    text = "Paris is the [MASK] of France.[SEP]x [mask]"
    ids = ours_ids(tok, text, path)
    if special_tokens_in_strings:  # as tokenizers
        assert ids == reference("uncased").encode(text, add_special_tokens=False).ids
        assert tok.mask_token_id in ids and tok.sep_token_id in ids
    else:  # as original BERT: plain text
        assert tok.mask_token_id not in ids and ids.count(tok.token_to_id("[")) == 3


@pytest.mark.parametrize("path", TOKENIZER_PATHS)
def test_words_longer_than_100_characters_are_unknown(path):
    tok = tokenizer("cased")
    for word in ("a" * 100, "a" * 101, "é" * 100, "é" * 101, "\U0001d400" * 100, "x" * 1000):
        expected = reference("cased").encode(f"go {word} go", add_special_tokens=False).ids
        assert ours_ids(tok, f"go {word} go", path) == expected, len(word)


# --- offsets ----------------------------------------------------------------------------------


def test_offsets_on_accented_and_cjk_text():
    tok = tokenizer("uncased")
    text = "Naïve café in Zürich, 中文字 and 한국, also cafe\u0301 (decomposed)."
    ids, starts, ends = tok.tokenize_with_offsets(text, unit="char")
    spans = [text[s:e] for s, e in zip(starts.numpy(), ends.numpy(), strict=True)]
    assert spans[:4] == ["Naïve", "café", "in", "Zürich"]
    assert spans[5:8] == ["中", "文", "字"]
    after = spans[spans.index("also") + 1]
    assert after == "cafe"  # the dropped accent U+0301 ends no token, as in tokenizers
    hangul = [span for span, i in zip(spans, ids.numpy(), strict=True) if span in "한국"]
    assert len(hangul) > 2 and set(hangul) == {"한", "국"}  # jamo pieces share their syllable
    expected = reference("uncased").encode(text, add_special_tokens=False)
    spans_ = list(zip(starts.numpy(), ends.numpy(), strict=True))
    assert spans_ == [tuple(o) for o in expected.offsets]
    # Byte offsets address the UTF-8 bytes of the same spans.
    _, byte_starts, byte_ends = tok.tokenize_with_offsets(text)
    data = text.encode("utf-8")
    byte_spans = zip(byte_starts.numpy(), byte_ends.numpy(), strict=True)
    assert [data[s:e].decode() for s, e in byte_spans] == spans


def test_offsets_of_subwords_and_batches():
    tok = tokenizer("cased")
    lines = ["unaffable résumés", "", "Ångström ÅNGSTRÖM"]
    ids, offsets = ours_ids_and_offsets("cased", lines)
    assert (ids, offsets) == reference_ids_and_offsets("cased", lines)
    ids, starts, ends = tok.tokenize_with_offsets(tf.constant(lines))
    assert ids.shape.rank == starts.shape.rank == ends.shape.rank == 2
    assert starts.dtype == tf.int64
    with pytest.raises(ValueError, match="`unit` must be 'byte' or 'char'"):
        tok.tokenize_with_offsets(lines, unit="word")


def test_pre_split_words_align_labels_to_first_pieces():
    """NER: [batch, (words)] -> [batch, (words), (pieces)]; a word's label goes to its first
    piece, as in the original BERT NER recipe."""
    tok = tokenizer("cased")
    sentences = [
        ["@paulwalk", "It", "'s", "the", "Empire", "State", "Building"],
        ["protégé", "😂", "naïve"],
        [],
    ]
    words = tf.ragged.constant(sentences)
    pieces = tok(words)
    assert pieces.shape.rank == 3 and pieces.dtype == tf.int32
    for sentence, word_pieces in zip(sentences, pieces.to_list(), strict=True):
        assert len(word_pieces) == len(sentence)
        flat = [i for word in word_pieces for i in word]
        assert flat == reference("cased").encode(" ".join(sentence), add_special_tokens=False).ids
    # Word labels to pieces: the first piece of a word gets its label, the others -100.
    labels = tf.ragged.constant([[0, 0, 0, 0, 1, 2, 2], [3, 0, 0], []])
    per_word = pieces.values  # [words, (pieces)]
    first = tf.ragged.range(per_word.row_lengths()).values == 0
    word_labels = tf.gather(labels.values, per_word.value_rowids())
    piece_labels = pieces.with_flat_values(tf.where(first, word_labels, -100)).merge_dims(1, 2)
    assert [tok.id_to_token(i) for i in pieces[0, 0].numpy()] == ["@", "p", "##aul", "##walk"]
    assert piece_labels.to_list()[0] == [0, -100, -100, -100, 0, 0, -100, 0, 1, 2, 2]
    dense = tok(tf.constant([["a", "b"], ["c", "d"]]))  # dense words work too
    assert dense.to_list() == [[[170], [171]], [[172], [173]]]
    _, starts, _ = tok.tokenize_with_offsets(words, unit="char")
    assert starts.shape.rank == 3  # offsets are into each word


# --- detokenize -------------------------------------------------------------------------------


@pytest.mark.parametrize("skip", [True, False])
def test_detokenize_equals_tokenizers_decode(skip):
    tok = tokenizer("uncased")
    lines = ["Hello, world! Don't stop.", "unaffable naïve café", "[MASK] x ##y", ""]
    ids = tok(lines)
    ids = tf.concat([tf.fill([4, 1], tok.cls_token_id), ids, tf.fill([4, 1], 100)], axis=1)
    ours = [t.decode() for t in tok.detokenize(ids, skip_special_tokens=skip).numpy()]
    expected = [reference("uncased").decode(row, skip_special_tokens=skip) for row in ids.to_list()]
    assert ours == expected
    packed = tf.constant([[101, 7592, 2088, 102, 0, 0]])  # dense, padded
    assert tok.detokenize(packed).numpy().tolist() == [b"hello world"]
    assert tok.detokenize([7592, 2088]).numpy() == b"hello world"


# --- bad input --------------------------------------------------------------------------------


def test_empty_strings_and_empty_batches():
    tok = tokenizer("uncased")
    assert tok("").shape == (0,)
    assert tok(["", " \t\n", "\u200b\x00"]).to_list() == [[], [], []]
    empty = tok(tf.constant([], tf.string))
    assert empty.shape[0] == 0 and empty.dtype == tf.int32
    ids, starts, ends = tok.tokenize_with_offsets(tf.constant([], tf.string))
    assert ids.shape[0] == starts.shape[0] == ends.shape[0] == 0
    assert tok(tf.ragged.constant([[]], dtype=tf.string)).to_list() == [[]]


def test_invalid_utf8_is_read_as_replacement_characters():
    tok = tokenizer("uncased")
    raw = [b"caf\xc3", b"\xff\xfehello\x80 w\xe2\x82orld", b"\xed\xa0\x80ok"]
    ids = tok(tf.constant(raw)).to_list()
    expected = [
        reference("uncased").encode(r.decode("utf-8", "replace"), add_special_tokens=False).ids
        for r in raw
    ]
    assert ids == expected


def test_non_string_inputs_are_rejected():
    with pytest.raises(ValueError, match="expects strings"):
        tokenizer("uncased")(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="Received: inputs of shape"):
        tokenizer("uncased")(tf.zeros([1, 1, 1], tf.string))


@pytest.mark.parametrize("missing", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
def test_vocabulary_without_special_token(tmp_path, missing):
    tokens = [t for t in load_vocabulary(vocab_path("uncased")) if t != missing]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    message = (
        rf"`vocabulary` is missing required special token '\{missing[:-1]}\]'\. "
        rf"Received: vocabulary=.*vocab.txt \(30521 tokens\)\. Use an original BERT"
    )
    with pytest.raises(ValueError, match=message):
        BertTokenizer(path)
    with pytest.raises(ValueError, match="missing required special token"):
        BertTokenizer(tokens)


def test_bad_vocabulary_arguments(tmp_path):
    with pytest.raises(ValueError, match="`vocabulary` file not found"):
        BertTokenizer(tmp_path / "nope.txt")
    (tmp_path / "latin1.txt").write_bytes(b"[PAD]\n\xe9t\xe9\n")
    with pytest.raises(ValueError, match="must be a UTF-8 text file"):
        BertTokenizer(tmp_path / "latin1.txt")
    with pytest.raises(ValueError, match="must be a vocab.txt path or a list"):
        BertTokenizer({"[PAD]": 0})
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match=r"missing required special token '\[PAD\]'"):
        BertTokenizer(tmp_path / "empty.txt")


def test_vocabulary_quirks_follow_tokenizers(tmp_path):
    """Duplicate tokens (the last id wins), blank lines, trailing spaces and CRLF."""
    tokens = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "hello",
        "world",
        "hello",
        "",
        "##s",
        "the ",
        "x",
    ]
    path = tmp_path / "vocab.txt"
    path.write_bytes("\r\n".join(tokens).encode())
    tok = BertTokenizer(path)
    expected = BertWordPieceTokenizer(str(path), lowercase=True)
    for text in ["hello worlds the x", "hellos", "y"]:
        assert tok(text).numpy().tolist() == expected.encode(text, add_special_tokens=False).ids
    assert tok.vocabulary_size() == len(tokens)


def test_check_vocabulary_size(tmp_path):
    tok = tokenizer("uncased")
    check_vocabulary_size(tok, 30522)
    check_vocabulary_size(vocab_path("cased"), 28996)
    with pytest.raises(
        ValueError,
        match=r"vocabulary has 30522 tokens but the encoder's "
        r"`vocabulary_size` is 1000",
    ):
        check_vocabulary_size(tok, 1000)


# --- presets, saving --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "preset, lowercase, size",
    [
        ("bert_tiny_en_uncased", True, 30522),
        ("bert_base_en", False, 28996),
        ("bert_base_multi", False, 119547),
        ("bert_base_zh", True, 21128),
    ],
)
def test_from_preset(preset, lowercase, size):
    tok = BertTokenizer.from_preset(preset)
    assert tok.lowercase is lowercase and tok.vocabulary_size() == size


def test_from_preset_directory_with_mismatched_vocabulary(tmp_path):
    from keras_bert_zoo import presets

    data = json.loads((presets.builtin_presets_dir() / "bert_tiny_en_uncased.json").read_text())
    data["tokenizer"] = {"vocabulary": "vocab.txt", "lowercase": True}
    data.pop("weights", None)
    (tmp_path / "preset.json").write_text(json.dumps(data))
    tokens = load_vocabulary(vocab_path("uncased"))[:1000]
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    presets.write_checksums(tmp_path)
    with pytest.raises(
        ValueError, match="1000 tokens but the encoder's `vocabulary_size` is 30522"
    ):
        BertTokenizer.from_preset(tmp_path)


def test_config_round_trip_is_self_contained():
    tok = BertTokenizer(
        vocab_path("cased"), lowercase=False, special_tokens_in_strings=False, name="tok"
    )
    config = json.loads(json.dumps(tok.get_config()))
    assert config["vocabulary"][:2] == ["[PAD]", "[unused1]"]
    assert config["lowercase"] is False and config["special_tokens_in_strings"] is False
    clone = BertTokenizer.from_config(config)
    text = tf.constant(["Ångström [MASK] x"])
    assert clone(text).to_list() == tok(text).to_list()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(tok))
    assert isinstance(restored, BertTokenizer) and restored.get_config() == tok.get_config()


def test_tf_function_and_dataset():
    tok = tokenizer("uncased")
    lines = ["Hello world!", "naïve café", ""]
    function = tf.function(lambda x: tok(x).to_tensor())
    expected = tok(lines).to_tensor().numpy()
    np.testing.assert_array_equal(function(tf.constant(lines)).numpy(), expected)
    unbatched = [t.numpy().tolist() for t in tf.data.Dataset.from_tensor_slices(lines).map(tok)]
    assert unbatched == tok(lines).to_list()


# --- the host path (tokenizers + numpy), as JAX and PyTorch run it ------------------------------


def test_host_path_types_byte_offsets_words_and_detokenize_equal_the_graph():
    tok = tokenizer("uncased")
    text = "Naïve café in Zürich, 中文字 and 한국 [MASK]."
    sentences = [["@paulwalk", "It", "'s"], ["protégé", "😂"], []]
    with tokenizer_path("host"):
        ids = tok(["Hello world!", ""])
        assert all(isinstance(r, np.ndarray) and r.dtype == np.int32 for r in ids)
        host = tok.tokenize_with_offsets(text), tok(sentences), tok(np.array(["x y"]))
        decoded = tok.detokenize([[101, 7592, 1010, 2088, 999, 102, 0]])
        single = tok.detokenize(np.array([7592, 2088]))
    graph = tok.tokenize_with_offsets(text), tok(tf.ragged.constant(sentences)), tok(["x y"])
    for ours, expected in zip(host, graph, strict=True):
        assert token_rows(ours) == token_rows(expected)
    assert decoded == ["hello, world!"] and single == "hello world"
    with tokenizer_path("host"), pytest.raises(ValueError, match="expects strings"):
        tok(np.array([1, 2]))


def test_host_path_follows_vocabulary_quirks(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "hello", ""]
    tokens += ["##s", "the ", "x"]
    path = tmp_path / "vocab.txt"
    path.write_bytes("\r\n".join(tokens).encode())
    tok = BertTokenizer(path)
    expected = BertWordPieceTokenizer(str(path), lowercase=True)
    for text in ["hello worlds the x", "hellos", "y"]:
        assert ours_ids(tok, text, "host") == expected.encode(text, add_special_tokens=False).ids
