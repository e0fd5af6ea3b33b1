"""Pretraining data: statistics of generated records, the original schema, bad input, tf.data."""

import argparse
import errno
import glob
import logging
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tokenizers import BertWordPieceTokenizer

from keras_bert_zoo import cli
from keras_bert_zoo.data.pretraining import create, datasets, masking, records
from keras_bert_zoo.data.pretraining import text as ptext
from keras_bert_zoo.presets import builtin_presets_dir
from keras_bert_zoo.saving.vocabulary import load_vocabulary

DATA = Path(__file__).parent / "data" / "pretraining"
SENTENCES = DATA / "sentences.txt"
RAW = DATA / "raw_crlf.txt"
VOCAB = builtin_presets_dir() / "vocab" / "uncased.txt"
TOKENS = load_vocabulary(VOCAB)
PAD, CLS, SEP, MASK = (TOKENS.index(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]"))
L, P = 64, 20
FLAGS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)


@pytest.fixture(scope="module")
def hf_tokenize():
    """The reference WordPiece implementation as `tokenize_lines`."""
    wordpiece = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    return lambda lines: [e.ids for e in wordpiece.encode_batch(lines, add_special_tokens=False)]


def generate(directory, tokenize, name="out", shards=2, **kwargs) -> dict:
    options = dict(
        vocab_file=VOCAB,
        max_seq_length=L,
        max_predictions_per_seq=P,
        dupe_factor=10,
        random_seed=7,
        num_workers=1,
        tokenize_lines=tokenize,
    )
    options.update(kwargs)
    create.create_pretraining_data(
        options.pop("input_file", SENTENCES), f"{directory}/{name}@{shards}", **options
    )
    return read_records(
        f"{directory}/{name}-*", options["max_seq_length"], options["max_predictions_per_seq"]
    )


def read_records(pattern, max_seq_length=L, max_predictions=P) -> dict:
    """All records as NumPy arrays, plus `originals`: input_ids before masking."""
    spec = records.feature_spec(max_seq_length, max_predictions)
    files = sorted(glob.glob(str(pattern)))
    batches = [tf.io.parse_example(b, spec) for b in tf.data.TFRecordDataset(files).batch(1 << 16)]
    out = {k: np.concatenate([b[k].numpy() for b in batches]) for k in spec}
    originals = out["input_ids"].copy()
    rows, slots = np.nonzero(out["masked_lm_weights"])
    originals[rows, out["masked_lm_positions"][rows, slots]] = out["masked_lm_ids"][rows, slots]
    out["originals"], out["files"] = originals, files
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory, hf_tokenize):
    return generate(tmp_path_factory.mktemp("plain"), hf_tokenize)


@pytest.fixture(scope="module")
def whole_word(tmp_path_factory, hf_tokenize):
    return generate(tmp_path_factory.mktemp("wwm"), hf_tokenize, do_whole_word_mask=True)


def selected(r) -> np.ndarray:
    return r["masked_lm_weights"].sum(axis=1).astype(int)


def masked_now_and_before(r) -> tuple:
    weights = r["masked_lm_weights"] > 0
    rows = np.nonzero(weights)[0]
    return r["input_ids"][rows, r["masked_lm_positions"][weights]], r["masked_lm_ids"][weights]


def words(originals_row, positions) -> list:
    """Whole words (a start piece plus following ## pieces) among `positions`."""
    groups = []
    for position in positions:
        if (
            groups
            and TOKENS[originals_row[position]].startswith("##")
            and groups[-1][-1] == position - 1
        ):
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


# --- schema and round trip ---------------------------------------------------------------


def test_records_use_the_original_feature_names_and_types(plain):
    record = next(iter(tf.data.TFRecordDataset(plain["files"][0]))).numpy()
    feature = tf.train.Example.FromString(record).features.feature
    assert set(feature) == set(FLAGS)
    for name in FLAGS:
        kind = "float_list" if name == "masked_lm_weights" else "int64_list"
        length = 1 if name == "next_sentence_labels" else P if name[:6] == "masked" else L
        assert feature[name].WhichOneof("kind") == kind
        assert len(getattr(feature[name], kind).value) == length
    assert len(plain["files"]) == 2 and len(plain["input_ids"]) > 2000


def _google_style_record(rng) -> bytes:
    """A record written the way google-research/bert's writer does (independent code)."""
    length, predictions = 40, 6
    ids = [CLS] + list(rng.integers(1000, 2000, 20)) + [SEP] + list(rng.integers(1000, 2000, 17))
    ids += [SEP]
    positions = sorted(rng.choice(np.arange(1, 21), predictions, replace=False))
    ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    features = {
        "input_ids": ints(ids + [0] * (L - len(ids))),
        "input_mask": ints([1] * len(ids) + [0] * (L - len(ids))),
        "segment_ids": ints([0] * 22 + [1] * 18 + [0] * (L - length)),
        "masked_lm_positions": ints(positions + [0] * (P - predictions)),
        "masked_lm_ids": ints([int(ids[p]) for p in positions] + [0] * (P - predictions)),
        "masked_lm_weights": tf.train.Feature(
            float_list=tf.train.FloatList(value=[1.0] * predictions + [0.0] * (P - predictions))
        ),
        "next_sentence_labels": ints([1]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def test_pretraining_dataset_reads_google_records_into_model_inputs(tmp_path):
    rng = np.random.default_rng(0)
    serialized = [_google_style_record(rng) for _ in range(10)]
    with tf.io.TFRecordWriter(str(tmp_path / "google.tfrecord")) as writer:
        for record in serialized:
            writer.write(record)
    dataset = datasets.pretraining_dataset(
        str(tmp_path / "*.tfrecord"), 4, L, P, shuffle=False, repeat=False
    )
    batches = list(dataset)
    assert len(batches) == 2  # 10 records, batches of 4, remainder dropped
    x, y, weights = batches[0]
    assert set(x) == {"token_ids", "segment_ids", "padding_mask", "mask_positions"}
    assert all(v.dtype == tf.int32 for v in [*x.values(), *y.values()])
    assert x["token_ids"].shape == (4, L) and x["mask_positions"].shape == (4, P)
    assert y["nsp_logits"].shape == (4,) and np.all(y["nsp_logits"].numpy() == 1)
    assert weights["mlm_logits"].dtype == tf.float32 and weights["nsp_logits"].shape == (4,)
    first = tf.io.parse_single_example(serialized[0], records.feature_spec(L, P))
    np.testing.assert_array_equal(x["token_ids"][0], first["input_ids"])
    np.testing.assert_array_equal(y["mlm_logits"][0], first["masked_lm_ids"])
    with pytest.raises(ValueError, match="max_seq_length=64"):
        datasets.pretraining_dataset(str(tmp_path / "*.tfrecord"), 4, 128, P)


def test_pretraining_dataset_shuffles_repeats_and_batches(plain):
    pattern = str(Path(plain["files"][0]).parent / "out-*")
    dataset = datasets.pretraining_dataset(pattern, 32, L, P, seed=3)
    first = [b[0]["token_ids"].numpy() for b in dataset.take(3)]
    again = [
        b[0]["token_ids"].numpy()
        for b in datasets.pretraining_dataset(pattern, 32, L, P, seed=3).take(3)
    ]
    np.testing.assert_array_equal(np.stack(first), np.stack(again))
    total = sum(1 for _ in datasets.pretraining_dataset(pattern, 32, L, P, repeat=False))
    assert total == len(plain["input_ids"]) // 32 or total == len(plain["input_ids"]) // 32 - 1


# --- statistics ------------------------------------------------------------------------


def test_fifteen_percent_of_maskable_tokens_are_selected(plain):
    maskable = plain["input_mask"].sum(axis=1) - 3  # all but [CLS] and two [SEP]
    counts = selected(plain)
    rate = counts.sum() / maskable.sum()
    assert abs(rate - 0.15) < 0.01, rate
    expected = np.minimum(P, np.maximum(1, np.round(maskable * 0.15).astype(int)))
    assert np.mean(counts == expected) > 0.999  # banker's vs half-up rounding aside
    logging.getLogger(__name__).info("selection rate %.4f over %d positions", rate, counts.sum())


def test_selected_positions_are_never_special_or_padding(plain):
    for row in range(len(plain["input_ids"])):
        n = selected(plain)[row]
        positions = plain["masked_lm_positions"][row]
        assert np.all(plain["masked_lm_weights"][row, :n] == 1)
        assert not np.any(plain["masked_lm_weights"][row, n:])
        assert not np.any(positions[n:]) and not np.any(plain["masked_lm_ids"][row, n:])
        assert np.all(np.diff(positions[:n]) > 0)  # sorted, distinct
        assert np.all(plain["input_mask"][row, positions[:n]] == 1)
        assert not np.isin(plain["originals"][row, positions[:n]], [CLS, SEP, PAD]).any()


def test_max_predictions_per_seq_caps_the_selection(tmp_path, hf_tokenize):
    capped = generate(tmp_path, hf_tokenize, max_predictions_per_seq=5, dupe_factor=2)
    counts = selected(capped)
    maskable = capped["input_mask"].sum(axis=1) - 3
    assert counts.max() == 5
    assert np.all(counts[np.round(maskable * 0.15) >= 5] == 5)


def test_eighty_ten_ten_split(plain):
    now, before = masked_now_and_before(plain)
    as_mask, kept = np.mean(now == MASK), np.mean(now == before)
    other = 1 - as_mask - kept
    assert len(now) > 15000
    assert abs(as_mask - 0.8) < 0.01 and abs(kept - 0.1) < 0.01 and abs(other - 0.1) < 0.01
    replaced = now[(now != MASK) & (now != before)]
    assert not any(TOKENS[t].startswith("[") and TOKENS[t].endswith("]") for t in replaced)
    assert len(set(replaced.tolist())) > 0.8 * len(replaced)  # spread over the vocabulary


def test_next_sentence_labels_are_balanced_and_correct(plain, hf_tokenize):
    labels = plain["next_sentence_labels"][:, 0]
    assert abs(labels.mean() - 0.5) < 0.03, labels.mean()
    documents = ptext.documents_from_lines(SENTENCES.read_text().split("\n"))
    streams = [
        np.concatenate(
            [np.asarray(ids, np.int32) for ids in hf_tokenize([s for _, s in d])]
        ).tobytes()
        for d in documents
    ]
    checked = 0
    for row in np.flatnonzero(plain["input_mask"].sum(axis=1) < L):  # not truncated
        tokens = plain["originals"][row, : plain["input_mask"][row].sum()].astype(np.int32)
        a_end = int(np.flatnonzero(tokens == SEP)[0])
        a, b = tokens[1:a_end], tokens[a_end + 1 : -1]
        with_a = {i for i, s in enumerate(streams) if a.tobytes() in s}
        with_b = {i for i, s in enumerate(streams) if b.tobytes() in s}
        joined = any(np.concatenate([a, b]).tobytes() in s for s in streams)
        assert joined == (labels[row] == 0), row  # 0: B really follows A
        if labels[row] == 1 and len(with_a) == len(with_b) == 1:
            assert with_a != with_b  # a random B comes from another document
        checked += 1
    assert checked > 300


def test_whole_word_masking_never_masks_part_of_a_word(whole_word, plain):
    def partial_words(r):
        partial = 0
        for row in range(len(r["input_ids"])):
            n = selected(r)[row]
            chosen = set(r["masked_lm_positions"][row, :n].tolist())
            candidates = [
                i
                for i in range(1, r["input_mask"][row].sum())
                if r["originals"][row, i] not in (CLS, SEP)
            ]
            for word in words(r["originals"][row], candidates):
                partial += 0 < len(chosen.intersection(word)) < len(word)
        return partial

    assert partial_words(whole_word) == 0
    assert partial_words(plain) > 10  # the check does catch per-piece masking
    rate = selected(whole_word).sum() / (whole_word["input_mask"].sum(axis=1) - 3).sum()
    assert 0.14 < rate <= 0.15  # words that do not fit the budget are skipped


def test_generation_is_deterministic_for_a_seed(tmp_path, hf_tokenize):
    def shard_bytes(name, **kwargs):
        generate(tmp_path, hf_tokenize, name=name, dupe_factor=2, **kwargs)
        return [Path(f).read_bytes() for f in sorted(glob.glob(f"{tmp_path}/{name}-*"))]

    first = shard_bytes("a")
    assert shard_bytes("b") == first
    assert shard_bytes("c", random_seed=8) != first
    # Files are processed in worker processes; the output does not depend on how many.
    documents = SENTENCES.read_text().split("\n\n")
    halves = [write(tmp_path / f"half{i}.txt", "\n\n".join(documents[i::2])) for i in (0, 1)]
    serial = shard_bytes("d", input_file=halves)
    assert shard_bytes("e", input_file=halves, num_workers=2) == serial


# --- text input ------------------------------------------------------------------------


def test_raw_text_is_split_into_sentences_and_documents(tmp_path, hf_tokenize):
    lines = RAW.read_bytes().decode("utf-8").split("\n")
    documents = ptext.documents_from_lines(lines, "raw")
    assert len(documents) == 2
    sentences = [s for d in documents for _, s in d]
    assert sentences[0] == "To Sherlock Holmes she is always THE woman."
    assert not any("\r" in s for s in sentences)
    assert ptext.split_sentences(
        "It was Mr. Holmes. H. americanus lives. Yes! 'No?' she said."
    ) == ["It was Mr. Holmes.", "H. americanus lives.", "Yes!", "'No?' she said."]
    assert ptext.split_sentences("他来了。我走了！好") == ["他来了。", "我走了！", "好"]
    r = generate(tmp_path, hf_tokenize, input_file=RAW, input_format="raw", dupe_factor=3)
    assert len(r["input_ids"]) > 50


def test_vocabulary_is_split_on_newlines_only(tmp_path):
    chinese = builtin_presets_dir() / "vocab" / "chinese.txt"
    text = chinese.read_text(encoding="utf-8")
    assert len(load_vocabulary(chinese)) == text.count("\n") < len(text.splitlines())
    (tmp_path / "v.txt").write_text("[PAD]\n[CLS]\n[SEP]\n[MASK]\n\u2028\nA\n##b\n")
    info = ptext.vocabulary_info(load_vocabulary(tmp_path / "v.txt"))
    assert info.tokens[4:] == ["", "A", "##b"] and info.is_subword.tolist()[-1]  # trimmed
    assert info.random_ids.tolist() == [4, 5, 6]


# --- bad input -------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_input_file_is_a_clear_error(tmp_path, hf_tokenize, content):
    empty = write(tmp_path / "empty.txt", content)
    with pytest.raises(ValueError, match="empty.txt has no text"):
        generate(tmp_path, hf_tokenize, input_file=f"{SENTENCES},{empty}")
    assert not list(tmp_path.glob("out*"))


def test_documents_with_one_sentence(tmp_path, hf_tokenize):
    singles = write(tmp_path / "singles.txt", "One line.\n\nAnother line.\n\nA third.\n")
    with pytest.raises(ValueError, match="every document has a single sentence"):
        generate(tmp_path, hf_tokenize, input_file=singles)
    one_document = write(tmp_path / "one.txt", "First sentence here.\nSecond one here.\n")
    with pytest.raises(ValueError, match="at least 2"):
        generate(tmp_path, hf_tokenize, input_file=one_document)
    # Mixed in with real documents they are used (as A, or as random B segments).
    r = generate(tmp_path, hf_tokenize, input_file=f"{SENTENCES},{singles}", dupe_factor=2)
    assert abs(r["next_sentence_labels"].mean() - 0.5) < 0.05


def test_lines_longer_than_max_seq_length(tmp_path, hf_tokenize, caplog):
    long_line = " ".join(["word"] * 300)
    mixed = write(tmp_path / "mixed.txt", SENTENCES.read_text() + "\n" + long_line + "\nEnd.\n")
    with caplog.at_level(logging.WARNING):
        r = generate(tmp_path, hf_tokenize, input_file=mixed, dupe_factor=1)
    assert "1 line(s) longer than max_seq_length=64 will be truncated" in caplog.text
    assert r["input_mask"].sum(axis=1).max() <= L
    paragraphs = write(
        tmp_path / "paragraphs.txt",
        "\n".join([long_line] * 5) + "\n\n" + "\n".join([long_line] * 5),
    )
    with pytest.raises(ValueError, match="paragraphs.txt: 10 of 10 lines .*--input_format raw"):
        generate(tmp_path, hf_tokenize, input_file=paragraphs)


def test_vocabulary_and_preset_mismatches(tmp_path, hf_tokenize):
    cased = builtin_presets_dir() / "vocab" / "cased.txt"
    with pytest.raises(ValueError, match="differs from preset 'bert_tiny_en_uncased'"):
        ptext.resolve_vocabulary(cased, "bert_tiny_en_uncased", None)
    with pytest.raises(ValueError, match="contradicts preset"):
        ptext.resolve_vocabulary(None, "bert_tiny_en_uncased", False)
    path, lowercase = ptext.resolve_vocabulary(VOCAB, "bert_tiny_en_uncased", None)
    assert load_vocabulary(path) == TOKENS and lowercase is True
    with pytest.raises(ValueError, match="uncased"):
        generate(tmp_path, hf_tokenize, do_lower_case=False)
    no_mask = write(tmp_path / "vocab.txt", "[PAD]\n[CLS]\n[SEP]\nhello\n")
    with pytest.raises(ValueError, match=r"no \[MASK\] token"):
        generate(tmp_path, hf_tokenize, vocab_file=no_mask)
    small = write(tmp_path / "small.txt", "\n".join(TOKENS[:1000]) + "\n")
    with pytest.raises(ValueError, match="tokenizer and vocabulary differ"):
        generate(tmp_path, hf_tokenize, vocab_file=small)
    with pytest.raises(ValueError, match="--vocab_file .* or --preset"):
        generate(tmp_path, hf_tokenize, vocab_file=None)


def test_unwritable_output_directory_fails_before_any_work(tmp_path, hf_tokenize):
    blocker = write(tmp_path / "not_a_directory", "x")
    calls = []
    with pytest.raises(OSError, match="Cannot write to output directory .*not_a_directory"):
        generate(blocker, lambda lines: calls.append(lines) or hf_tokenize(lines))
    assert not calls


class _DiskFullWriter:
    """A TFRecordWriter whose disk fills up after a few records."""

    written = 0

    def __init__(self, path):
        self.path, self.handle = path, open(path, "wb")

    def write(self, record):
        _DiskFullWriter.written += 1
        if _DiskFullWriter.written > 300:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.handle.write(record)

    def close(self):
        self.handle.close()


def test_disk_full_leaves_no_shard_behind(tmp_path, hf_tokenize, monkeypatch):
    monkeypatch.setattr(tf.io, "TFRecordWriter", _DiskFullWriter)  # what records writes with
    with pytest.raises(OSError, match=r"Could not write .*out-0000\d-of-00002: .*No space left"):
        generate(tmp_path, hf_tokenize, dupe_factor=2)
    assert _DiskFullWriter.written > 300
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_bad_flags_and_paths(tmp_path, hf_tokenize):
    with pytest.raises(ValueError, match="--max_seq_length=4"):
        generate(tmp_path, hf_tokenize, max_seq_length=4)
    with pytest.raises(ValueError, match="--masked_lm_prob=0"):
        generate(tmp_path, hf_tokenize, masked_lm_prob=0)
    with pytest.raises(ValueError, match="--dupe_factor=0"):
        generate(tmp_path, hf_tokenize, dupe_factor=0)
    with pytest.raises(FileNotFoundError, match="no file matches 'nothing-here-\\*'"):
        generate(tmp_path, hf_tokenize, input_file="nothing-here-*")
    with pytest.raises(ValueError, match="would overwrite the input"):
        create.create_pretraining_data(SENTENCES, str(SENTENCES), vocab_file=VOCAB)


# --- command line ----------------------------------------------------------------------


def parse(*argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_create_pretraining_data_arguments(parser)
    return parser.parse_args(argv)


def test_flags_keep_the_original_names_and_meaning():
    args = parse("--input_file=a.txt", "--output_file=b", "--vocab_file=v.txt")
    assert (
        args.max_seq_length,
        args.max_predictions_per_seq,
        args.masked_lm_prob,
        args.dupe_factor,
        args.short_seq_prob,
        args.random_seed,
    ) == (128, 20, 0.15, 10, 0.1, 12345)
    assert args.do_lower_case is None and not args.do_whole_word_mask
    args = parse(
        "--input_file=a", "--output_file=b", "--do_lower_case=false", "--do_whole_word_mask"
    )
    assert args.do_lower_case is False and args.do_whole_word_mask is True
    assert parse("--input_file=a", "--output_file=b", "--nodo_lower_case").do_lower_case is False
    kebab = parse("--input-file=a", "--output-file=b", "--max-seq-length=64")
    assert (kebab.input_file, kebab.output_file, kebab.max_seq_length) == ("a", "b", 64)


def test_command_line_run_matches_the_reference_tokenizer(tmp_path, hf_tokenize, capsys):
    flags = (
        "--input_file",
        str(SENTENCES),
        "--preset",
        "bert_tiny_en_uncased",
        "--max_seq_length",
        "64",
        "--dupe_factor",
        "1",
        "--random_seed",
        "5",
    )
    assert cli.main(["create-pretraining-data", *flags, "--output_file", f"{tmp_path}/cli@2"]) == 0
    assert "instances" in capsys.readouterr().out
    generate(
        tmp_path,
        hf_tokenize,
        name="reference",
        dupe_factor=1,
        random_seed=5,
        max_predictions_per_seq=20,
    )
    for ours, reference in zip(
        sorted(tmp_path.glob("cli-*")), sorted(tmp_path.glob("ref*")), strict=True
    ):
        assert ours.read_bytes() == reference.read_bytes()  # kbz tokenizer == WordPiece ref.
    blocker = write(tmp_path / "file", "x")
    status = cli.main(["create-pretraining-data", *flags, "--output_file", f"{blocker}/o"])
    assert status == 1 and "Cannot write" in capsys.readouterr().err


# --- dynamic masking -------------------------------------------------------------------


def test_dynamic_masking_has_the_same_statistics_and_fresh_masks(hf_tokenize):
    dataset = masking.dynamic_masking_dataset(
        str(SENTENCES), hf_tokenize, VOCAB, 32, max_seq_length=L, seed=11, repeat=False
    )
    # 5 passes: a pass pairs each chunk once (no put-back of unused sentences), ~190 pairs.
    epochs = [list(dataset) for _ in range(5)]
    x, y, weights = epochs[0][0]
    assert x["token_ids"].shape == (32, L) and y["mlm_logits"].shape == (32, P)
    assert all(v.dtype == tf.int32 for v in [*x.values(), *y.values()])
    stack = lambda part, k: np.concatenate(  # noqa: E731
        [b[part][k].numpy() for epoch in epochs for b in epoch]
    )
    ids, mask = stack(0, "token_ids"), stack(0, "padding_mask")
    positions, labels, chosen = (
        stack(0, "mask_positions"),
        stack(1, "mlm_logits"),
        stack(2, "mlm_logits") > 0,
    )
    assert len(ids) > 800
    assert abs(chosen.sum() / (mask.sum() - 3 * len(ids)) - 0.15) < 0.01
    now, before = np.take_along_axis(ids, positions, axis=1)[chosen], labels[chosen]
    assert abs(np.mean(now == MASK) - 0.8) < 0.02 and abs(np.mean(now == before) - 0.1) < 0.02
    assert abs(stack(1, "nsp_logits").mean() - 0.5) < 0.05
    # Each pass makes new pairs and masks; the same seed gives the same passes.
    assert not np.array_equal(epochs[1][0][0]["token_ids"], x["token_ids"])
    again = masking.dynamic_masking_dataset(
        str(SENTENCES), hf_tokenize, VOCAB, 32, max_seq_length=L, seed=11, repeat=False
    )
    np.testing.assert_array_equal(next(iter(again))[0]["token_ids"], x["token_ids"])


def test_dynamic_masking_from_a_dataset_of_lines_with_the_tf_tokenizer():
    from keras_bert_zoo.tokenization import BertTokenizer

    lines = tf.data.TextLineDataset(str(SENTENCES))
    dataset = masking.dynamic_masking_dataset(
        lines,
        BertTokenizer(vocabulary=str(VOCAB), lowercase=True),
        TOKENS,
        8,
        max_seq_length=32,
        max_predictions_per_seq=5,
        do_whole_word_mask=True,
        seed=1,
    )
    x, y, weights = next(iter(dataset))
    assert x["token_ids"].shape == (8, 32) and x["mask_positions"].shape == (8, 5)
    assert np.all(x["token_ids"][:, 0] == CLS)
    assert weights["nsp_logits"].numpy().tolist() == [1.0] * 8
