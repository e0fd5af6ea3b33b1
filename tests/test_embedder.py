"""Sentence embeddings: pooling invariants, the task config, parity with sentence-transformers
on the real all-MiniLM-L6-v2, and the string-in SavedModel in a process without the package.

tests/fixtures/minilm_st_embeddings.npz holds `SentenceTransformer(...).encode(sentences)` of
the checkpoint, recorded by tools/record_embedding_reference.py (versions, model files'
sha256 and the command in the .json beside it); minilm_st_long_embeddings.npz the same for
SQuAD paragraphs of 135-380 tokens (sentence-transformers truncates at its max_seq_length,
256), recorded by tools/record_long_embedding_reference.py with its recipe.
"""

import json
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bert_zoo as kbz
from keras_bert_zoo.layers import SentencePooling
from tests.conftest import TINY, random_inputs

FIXTURES = Path(__file__).parent / "fixtures"
NAME = "minilm_st_embeddings"
LONG = "minilm_st_long_embeddings"


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(FIXTURES / f"{NAME}.npz", allow_pickle=False))


@pytest.fixture(scope="module")
def provenance():
    return json.loads((FIXTURES / f"{NAME}.json").read_text())


@pytest.fixture(scope="module")
def long_reference():
    return dict(np.load(FIXTURES / f"{LONG}.npz", allow_pickle=False))


@pytest.fixture(scope="module")
def long_provenance():
    return json.loads((FIXTURES / f"{LONG}.json").read_text())


@pytest.fixture(scope="module")
def minilm_embedder(minilm_preset):
    return kbz.from_preset(str(minilm_preset), task="embedder")


def _ids(reference, rows=slice(None)):
    return {k: reference[k][rows] for k in ("token_ids", "segment_ids", "padding_mask")}


# --- the pooling layer, against numpy -----------------------------------------------------


def _numpy_pool(sequence, mask, pooling):
    mask = mask[..., None].astype(np.float32)
    if pooling == "cls":
        return sequence[:, 0]
    if pooling == "max":
        return np.where(mask > 0, sequence, -1e9).max(1)
    return (sequence * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
@pytest.mark.parametrize("normalize", [True, False])
def test_pooling_matches_numpy_over_real_tokens(pooling, normalize):
    rng = np.random.default_rng(0)
    sequence = rng.normal(size=(3, 7, 5)).astype(np.float32)
    mask = (np.arange(7)[None] < np.array([7, 4, 1])[:, None]).astype(np.int32)
    out = np.asarray(SentencePooling(pooling, normalize)(sequence, mask))
    expected = _numpy_pool(sequence, mask, pooling)
    if normalize:
        expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
        np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    # padded positions count for nothing: changing them changes no vector
    noisy = np.where(mask[..., None] > 0, sequence, 1e3).astype(np.float32)
    np.testing.assert_allclose(np.asarray(SentencePooling(pooling, normalize)(noisy, mask)), out)


def test_all_padding_rows_stay_finite():
    out = SentencePooling("mean", True)(np.ones((2, 3, 4), np.float32), np.zeros((2, 3), "int32"))
    assert np.isfinite(np.asarray(out)).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [({"pooling": "sum"}, "`pooling` must be one of"), ({"normalize": "yes"}, "`normalize`")],
)
def test_bad_pooling_arguments_are_named(kwargs, message):
    encoder = kbz.build_encoder(**TINY)
    with pytest.raises(ValueError, match=message):
        kbz.build_embedder(encoder, **kwargs)
    with pytest.raises(ValueError, match=message):
        kbz.tasks.build_task("embedder", encoder, **kwargs)


# --- the task model ------------------------------------------------------------------------


def test_embedder_is_padding_and_batch_invariant_and_round_trips(tmp_path):
    keras.utils.set_random_seed(0)
    model = kbz.build_embedder(kbz.build_encoder(**TINY), pooling="max", normalize=False)
    short = random_inputs(batch=3, length=12, lengths=[12, 7, 3])
    vectors = np.asarray(model(short))
    assert vectors.shape == (3, TINY["hidden_dim"]) and vectors.dtype == np.float32
    padded = {k: np.pad(v, ((0, 0), (0, 8))) for k, v in short.items()}
    np.testing.assert_allclose(np.asarray(model(padded)), vectors, atol=1e-5)
    one = {k: v[1:2, :7] for k, v in short.items()}
    np.testing.assert_allclose(np.asarray(model(one))[0], vectors[1], atol=1e-5)
    model.save(tmp_path / "embedder.keras")
    loaded = kbz.load_model(tmp_path / "embedder.keras")
    assert loaded.task == "embedder"
    assert loaded.task_config == {"pooling": "max", "normalize": False}
    np.testing.assert_allclose(np.asarray(loaded(short)), vectors, atol=1e-6)


def test_saved_embedder_preset_keeps_its_pooling(tmp_path):
    model = kbz.build_embedder(kbz.build_encoder(**TINY), pooling="cls")
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(995)]
    kbz.save_preset(model, tmp_path / "p", vocabulary=vocabulary, lowercase=True)
    again = kbz.from_preset(str(tmp_path / "p"), task="embedder")
    assert again.task_config == {"pooling": "cls", "normalize": True}
    inputs = random_inputs()
    np.testing.assert_allclose(np.asarray(again(inputs)), np.asarray(model(inputs)), atol=1e-6)


def test_preset_embedder_block_is_validated(tmp_path):
    from keras_bert_zoo.saving.preset import check_embedder_defaults

    assert check_embedder_defaults({"pooling": "max"}, "x") == {"pooling": "max"}
    for bad in ({"pooling": "avg"}, {"normalize": 1}, {"dim": 3}, ["mean"]):
        with pytest.raises(ValueError, match="`embedder"):
            check_embedder_defaults(bad, "preset.json")


# --- the real MiniLM checkpoint ------------------------------------------------------------


def test_reference_provenance_is_recorded(provenance, reference):
    assert {"sentence_transformers", "transformers", "torch", "model_files_sha256"} <= set(
        provenance
    )
    assert provenance["model_files_sha256"]["model.safetensors"] == (
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    )
    assert reference["embeddings"].shape == (len(provenance["sentences"]), 384)
    # the by-hand pooling of the recording tool agreed with sentence-transformers itself
    assert provenance["by_hand_vs_sentence_transformers_max_abs"] < 1e-6


def test_converted_sentence_transformers_dir_records_its_pooling(minilm_preset):
    config = kbz.presets.load_preset_config(str(minilm_preset))
    assert config.embedder == {"pooling": "mean", "normalize": True}
    assert config.task == "encoder"


def test_minilm_embedder_equals_sentence_transformers_within_1e5(minilm_embedder, reference):
    assert minilm_embedder.task_config == {"pooling": "mean", "normalize": True}
    vectors = np.asarray(minilm_embedder(_ids(reference)))
    assert np.abs(vectors - reference["embeddings"]).max() < 1e-5


def test_minilm_embedder_from_raw_strings(minilm_embedder, minilm_preset, reference, provenance):
    pre = kbz.BertPreprocessor.from_preset(str(minilm_preset), sequence_length=64)
    inputs = pre(np.array(provenance["sentences"]))
    np.testing.assert_array_equal(np.asarray(inputs["token_ids"]), reference["token_ids"])
    vectors = np.asarray(minilm_embedder(inputs))
    assert np.abs(vectors - reference["embeddings"]).max() < 1e-5
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > 0.5 > similarity[0, 2]  # paraphrase vs unrelated


def test_long_reference_provenance(long_provenance, long_reference):
    counts = long_provenance["token_counts_untruncated"]
    assert long_provenance["max_seq_length"] == 256 and min(counts) > 128
    assert max(c for c in counts if c <= 256) == 256 and max(counts) > 256  # one is cut
    assert long_provenance["texts_source"]["license"] == "CC BY-SA 4.0"
    assert {"transformers", "torch", "model_files_sha256", "pipeline", "tolerance"} <= set(
        long_provenance
    )
    assert long_reference["embeddings"].shape == (len(long_provenance["texts"]), 384)


def test_converted_sentence_transformers_dir_keeps_its_max_seq_length(minilm_preset):
    """`kbz convert` records sentence_bert_config.json's max_seq_length (issue 30, 12)."""
    assert kbz.presets.load_preset_config(str(minilm_preset)).sequence_length == 256
    assert kbz.BertPreprocessor.from_preset(str(minilm_preset)).sequence_length == 256
    assert kbz.presets.load_preset_config("all_minilm_l6_v2").sequence_length == 256


@pytest.mark.e2e  # reference parity at full length; the 64-token parity above stays fast
def test_minilm_equals_sentence_transformers_on_texts_up_to_256_tokens(
    minilm_embedder, minilm_preset, long_reference, long_provenance, tmp_path
):
    """`task="embedder"` with the preset's preprocessor and `kbz embed`, no length given,
    give `SentenceTransformer.encode`'s vectors of paragraphs of 135-380 tokens."""
    from keras_bert_zoo.cli import main

    texts = long_provenance["texts"]
    inputs = kbz.BertPreprocessor.from_preset(str(minilm_preset))(np.array(texts))
    np.testing.assert_array_equal(np.asarray(inputs["token_ids"]), long_reference["token_ids"])
    vectors = np.asarray(minilm_embedder(inputs))
    assert np.abs(vectors - long_reference["embeddings"]).max() < 1e-5
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    command = ["embed", "--model", str(minilm_preset), "--input", str(tmp_path / "in.txt")]
    assert main([*command, "--output", str(tmp_path / "out.npy")]) == 0
    embedded = np.load(tmp_path / "out.npy")
    assert np.abs(embedded - long_reference["embeddings"]).max() < 1e-5
    assert (
        main([*command, "--output", str(tmp_path / "short.npy"), "--sequence-length", "128"]) == 0
    )
    assert np.abs(np.load(tmp_path / "short.npy") - embedded).max() > 1e-2  # 128 differs


def test_to_huggingface_writes_the_max_seq_length_back(minilm_preset, tmp_path):
    from keras_bert_zoo.cli import main

    assert main(["convert", str(minilm_preset), str(tmp_path / "hf"), "--to", "huggingface"]) == 0
    config = json.loads((tmp_path / "hf" / "sentence_bert_config.json").read_text())
    assert config["max_seq_length"] == 256
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "back")]) == 0
    assert kbz.presets.load_preset_config(str(tmp_path / "back")).sequence_length == 256


# --- export --------------------------------------------------------------------------------

LOADER = r"""
import json, sys
sys.modules["keras_bert_zoo"] = None
sys.modules["keras_hub"] = None
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text=tf.constant(json.load(open(sys.argv[2]))))
np.save(sys.argv[3], out["embeddings"].numpy())
print(json.dumps(sorted(out)))
"""


@pytest.mark.e2e
def test_exported_embedder_serves_raw_strings_without_the_package(
    minilm_preset, reference, provenance, long_reference, long_provenance, tmp_path
):
    """`kbz export` of a converted sentence-transformers preset cuts texts at its
    max_seq_length (256) without being told, as `SentenceTransformer.encode` (issue 30, 12)."""
    from keras_bert_zoo.cli import main

    assert main(["export", str(minilm_preset), str(tmp_path / "emb" / "1")]) == 0
    texts = provenance["sentences"] + long_provenance["texts"]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            LOADER,
            str(tmp_path / "emb" / "1"),
            str(tmp_path / "texts.json"),
            str(tmp_path / "out.npy"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == ["embeddings"]
    served = np.load(tmp_path / "out.npy")
    expected = np.concatenate([reference["embeddings"], long_reference["embeddings"]])
    assert np.abs(served - expected).max() < 1e-5


# --- kbz embed ------------------------------------------------------------------------------


@pytest.mark.parametrize("packing", ["--packing", "--no-packing"])
def test_kbz_embed_writes_one_vector_per_line(
    minilm_preset, reference, provenance, tmp_path, packing
):
    """Packed rows (each text pooled over its own tokens) or length buckets: the vectors of
    sentence-transformers."""
    from keras_bert_zoo.cli import main

    lines = provenance["sentences"]
    assert "" in lines  # a blank line gets a vector too
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(
        ["embed", "--model", str(minilm_preset), "--input", str(tmp_path / "in.txt"),
         "--output", str(tmp_path / "out.npy"), "--batch-size", "3", packing]
    )  # fmt: skip
    assert code == 0
    vectors = np.load(tmp_path / "out.npy")
    assert vectors.shape == (len(lines), 384) and vectors.dtype == np.float32
    assert np.abs(vectors - reference["embeddings"]).max() < 1e-5


@pytest.mark.parametrize(
    "content, output, message",
    [
        (None, "out.npy", "--input .* does not exist"),
        ("", "out.npy", "--input .* is empty"),
        ("text\n", "out.txt", "--output must be a .npy file"),
    ],
)
def test_kbz_embed_bad_input_is_named(content, output, message, tmp_path, capsys):
    from keras_bert_zoo.cli import main

    if content is not None:
        (tmp_path / "in.txt").write_text(content)
    args = ["embed", "--model", "bert_tiny_en_uncased", "--input", str(tmp_path / "in.txt")]
    assert main([*args, "--output", str(tmp_path / output)]) == 2
    assert __import__("re").search(message, capsys.readouterr().err)
    assert not (tmp_path / output).exists()


def test_embed_texts_warns_about_truncation(caplog):
    keras.utils.set_random_seed(0)
    embedder = kbz.build_embedder(kbz.build_encoder(**TINY))
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    tokenizer = kbz.BertTokenizer(vocabulary=vocabulary + [f"w{i}" for i in range(993)])
    pre = kbz.BertPreprocessor(tokenizer, sequence_length=6)
    with caplog.at_level("WARNING"):
        vectors = kbz.jobs.embed_texts(embedder, pre, ["a b", "a b a b a b a b"], 1)
    assert vectors.shape == (2, TINY["hidden_dim"])
    assert "1 of 2 texts fill all 6 token positions" in caplog.text


# --- contrastive fine-tuning (kbz finetune embed) -----------------------------------------


def test_in_batch_similarity_is_scaled_cosine():
    from keras_bert_zoo.layers import InBatchSimilarity

    rng = np.random.default_rng(1)
    q, p = rng.normal(size=(4, 6)).astype("float32"), rng.normal(size=(4, 6)).astype("float32")
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    out = np.asarray(InBatchSimilarity(20.0)(q, p))
    np.testing.assert_allclose(out, 20.0 * unit(q) @ unit(p).T, atol=1e-5)


def test_contrastive_trainer_scores_every_query_against_every_positive():
    """`[pairs, 2, length]` in (query, positive), `20 x cos(query_i, positive_j)` out, through
    the embedder's own weights; the loss's target of row i is i, whatever `y` says."""
    keras.utils.set_random_seed(0)
    embedder = kbz.build_embedder(kbz.build_encoder(**TINY))
    trainer = kbz.tasks.build_contrastive_trainer(embedder)
    assert len(trainer.weights) == len(embedder.weights)
    queries, positives = random_inputs(batch=4, seed=1), random_inputs(batch=4, seed=2)
    logits = np.asarray(trainer({k: np.stack([queries[k], positives[k]], 1) for k in queries}))
    q, p = np.asarray(embedder(queries)), np.asarray(embedder(positives))
    np.testing.assert_allclose(logits, 20.0 * q @ p.T, atol=1e-4)  # normalised vectors
    shifted = logits - logits.max(1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    loss = kbz.tasks.in_batch_negatives_loss()(np.full(4, 3), logits)
    np.testing.assert_allclose(float(loss), -np.mean(np.diag(log_softmax)), rtol=1e-5)


def test_distinct_batches_never_repeat_a_text():
    from keras_bert_zoo.training.distinct_batches import distinct_batches

    pairs = [(f"q{i}", f"p{i % 5}") for i in range(40)]  # 8 questions per paragraph
    batches = distinct_batches(pairs, 4, seed=0)
    assert batches and all(len(b) == 4 for b in batches)
    for batch in batches:
        positives = [pairs[i][1] for i in batch]
        assert len(set(positives)) == 4
    used = [i for b in batches for i in b]
    assert len(used) == len(set(used))


@pytest.mark.parametrize(
    "content, message",
    [("", "is empty"), ("query\tpositive\nonly one field\n", "pair 1: expected `query<TAB>")],
)
def test_bad_pairs_files_are_named(content, message, tmp_path):
    from keras_bert_zoo.data.pairs_reader import read_pairs

    (tmp_path / "p.tsv").write_text(content)
    with pytest.raises(ValueError, match=message):
        read_pairs(tmp_path / "p.tsv", "--train")


SQUAD_SUBSET = Path(__file__).parent / "data" / "squad_v1.1_dev_subset.json"


def _squad_pairs(path):
    rows = ["query\tpositive"]
    for article in json.loads(path.read_text())["data"]:
        for paragraph in article["paragraphs"]:
            context = " ".join(paragraph["context"].split())
            rows += [" ".join(qa["question"].split()) + "\t" + context for qa in paragraph["qas"]]
    return rows


def _tiny_preset(directory, texts):
    """A TINY-architecture preset whose vocabulary holds the words of `texts`."""
    import collections
    import re

    counts = collections.Counter(re.findall(r"\w+|[^\w\s]", " ".join(texts).lower()))
    words = [w for w, _ in counts.most_common(TINY["vocabulary_size"] - 5)]
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    vocabulary += [f"[unused{i}]" for i in range(TINY["vocabulary_size"] - len(vocabulary))]
    keras.utils.set_random_seed(0)
    kbz.save_preset(kbz.build_encoder(**TINY), directory, vocabulary=vocabulary, lowercase=True)
    return directory


@pytest.mark.e2e
def test_finetune_embed_improves_retrieval_of_its_pairs(tmp_path, capsys):
    from keras_bert_zoo.cli import main

    rows = _squad_pairs(SQUAD_SUBSET)  # 115 SQuAD questions of 24 paragraphs
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n")
    preset = _tiny_preset(tmp_path / "tiny", rows[1:])
    run = ["finetune", "embed", "--preset", str(preset), "--train", str(tmp_path / "pairs.tsv"),
           "--validation", str(tmp_path / "pairs.tsv"), "--output", str(tmp_path / "run"),
           "--batch-size", "8", "--epochs", "4", "--learning-rate", "1e-3",
           "--sequence-length", "64"]  # fmt: skip
    assert main(run) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["train_pairs"] == 115 and 4 * 12 <= metrics["steps"] <= 4 * 14
    before, after = metrics["before"], metrics["after"]
    # training on these very pairs must rank their paragraphs higher than random weights did
    assert after["mrr"] > before["mrr"] + 0.1, metrics
    assert after["recall@5"] >= before["recall@5"], metrics
    assert (tmp_path / "run" / "export" / "1" / "saved_model.pb").is_file()
    # as `kbz finetune`'s: the model as a .keras file and TensorBoard logs, each listed
    reloaded = kbz.load_model(tmp_path / "run" / "model.keras")
    assert reloaded.task == "embedder"
    assert list((tmp_path / "run" / "logs").rglob("events.out.tfevents.*"))
    listed = capsys.readouterr().out
    for name in ("model.keras", "preset", "export/1", "metrics.json", "logs"):
        assert f"{tmp_path / 'run' / name}: " in listed, name
    assert main(run) == 0  # the same command again: the finished run's metrics
    printed = capsys.readouterr().out
    assert json.loads(printed[: printed.rindex("}") + 1]) == metrics
    # kbz embed reads the run directory: its preset and sequence length
    (tmp_path / "q.txt").write_text("\n".join(r.split("\t")[0] for r in rows[1:4]) + "\n")
    embed = ["embed", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "q.txt")]
    assert main([*embed, "--output", str(tmp_path / "q.npy")]) == 0
    assert np.load(tmp_path / "q.npy").shape == (3, TINY["hidden_dim"])


# --- sentence-transformers pipelines, overrides, XLA -------------------------------------


def _st_directory(tmp_path, modules, pooling):
    (tmp_path / "1_Pooling").mkdir(parents=True)
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return tmp_path


ST = "sentence_transformers.models."
TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": ST + "Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": ST + "Pooling"}
NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize", "type": ST + "Normalize"}
DENSE = {"idx": 2, "name": "2", "path": "2_Dense", "type": ST + "Dense"}


@pytest.mark.parametrize(
    "modules, pooling, expected",
    [
        ([TRANSFORMER, POOLING], {"pooling_mode_cls_token": True}, {"pooling": "cls"}),
        ([TRANSFORMER, POOLING, NORMALIZE], {"pooling_mode": "max"}, {"pooling": "max"}),
        ([TRANSFORMER, POOLING, DENSE], {"pooling_mode_mean_tokens": True}, None),
        ([TRANSFORMER, POOLING], {"pooling_mode_mean_sqrt_len_tokens": True}, None),
        (
            [TRANSFORMER, POOLING],
            {"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True},
            None,
        ),
    ],
)
def test_sentence_transformers_pooling_is_read_or_refused(modules, pooling, expected, tmp_path):
    from keras_bert_zoo.checkpoints.sentence_transformers import (
        read_sentence_transformers_pooling,
    )

    found = read_sentence_transformers_pooling(_st_directory(tmp_path, modules, pooling))
    if expected is None:
        assert found is None  # a pipeline we do not reproduce: no embedder block, a warning
    else:
        assert found == {**expected, "normalize": NORMALIZE in modules}


def test_task_arguments_override_the_presets_pooling(minilm_preset):
    model = kbz.from_preset(str(minilm_preset), task="embedder", pooling="cls", normalize=False)
    assert model.task_config == {"pooling": "cls", "normalize": False}


def test_embedder_jit_compiled_equals_eager():
    keras.utils.set_random_seed(0)
    model = kbz.build_embedder(kbz.build_encoder(**TINY))
    inputs = random_inputs(batch=4, length=16, lengths=[16, 9, 2, 5])
    eager = np.asarray(model(inputs))
    model.compile(jit_compile=True)
    np.testing.assert_allclose(model.predict(inputs, verbose=0), eager, atol=1e-5)
