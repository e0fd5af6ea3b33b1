"""The cross-encoder reranker: its file, metrics, mining, `kbz finetune/predict rerank`, export
and conversion from and to sentence-transformers' CrossEncoder.

The fixture (tests/fixtures/rerank, README there) holds 20 SQuAD questions of one article. A
tiny random preset trains once per module (listwise, 6 epochs, no XLA): these tests check the
plumbing (files, order, parity, a training loss that falls), not held-out learning, which
benchmarks/rerank_squad.py measures.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY, save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.data import read_ranking_tsv
from keras_bert_zoo.data.rerank_reader import RankingPair
from keras_bert_zoo.ranking_metrics import mrr_at_k, ranking_scores, recall_at_k
from keras_bert_zoo.tasks.reranker.hard_negatives import mine_hard_negatives
from keras_bert_zoo.tasks.reranker.query_groups import query_groups
from keras_bert_zoo.tasks.reranker.task import RerankingTask

FIXTURES = "tests/fixtures/rerank"
HEADER = "query\tpassage\tlabel\n"


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# --- the file --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("query\tpassage\nq\tp\n", r"line 1: the header \['query', 'passage'\] lacks.*'label'"),
        ("question\tpassage\tlabel\nq\tp\t1\n", r"lacks the column\(s\) \['query'\]"),
        (HEADER + "q\tp\t2\n", r"line 2: label '2' is not 0 or 1"),
        (HEADER + "q\tp\t1\nq\tp\n", r"line 3: has 2 TAB-separated columns, expected 3"),
        (HEADER + "q\t \t1\n", r"line 2: has an empty query or passage"),
        (HEADER, "has a header but no pairs"),
    ],
)
def test_bad_files_are_named_with_their_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_ranking_tsv(_write(tmp_path / "bad.tsv", text))


def test_validation_queries_need_a_relevant_passage(tmp_path):
    path = _write(tmp_path / "dev.tsv", HEADER + "a\tp1\t1\nb\tp1\t0\na\tp2\t0\nb\tp2\t0\n")
    assert len(read_ranking_tsv(path).pairs) == 4  # training: negatives-only queries are fine
    with pytest.raises(ValueError, match=r"line 3: query 'b' has no passage labelled 1 \(1 of 2"):
        read_ranking_tsv(path, require_relevant=True)


def test_candidates_read_without_labels_and_keep_their_rows(tmp_path):
    path = _write(tmp_path / "c.tsv", "id\tquery\tpassage\n7\tq\tp one\n8\tq\tp two\n")
    data = read_ranking_tsv(path, labels_optional=True)
    assert not data.labelled and data.labels.shape == (0,)
    assert [(p.query, p.passage, p.row) for p in data.pairs] == [
        ("q", "p one", "7\tq\tp one"),
        ("q", "p two", "8\tq\tp two"),
    ]
    assert data.header == ("id", "query", "passage")


# --- metrics, checked by hand ----------------------------------------------------------------


def test_metrics_on_hand_checked_rankings():
    # q1 ranks [n, r, n, r]: first hit at 2; q2 ranks [r, n]; q3 has its hit at 12th place.
    queries = ["q1"] * 4 + ["q2"] * 2 + ["q3"] * 12
    labels = [0, 1, 0, 1] + [1, 0] + [0] * 11 + [1]
    scores = [4.0, 3.0, 2.0, 1.0] + [0.5, 0.1] + list(np.arange(12, 0, -1.0))
    assert mrr_at_k(queries, labels, scores) == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert recall_at_k(queries, labels, scores, 1) == pytest.approx((0 + 1 + 0) / 3)
    assert recall_at_k(queries, labels, scores, 3) == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert recall_at_k(queries, labels, scores, 12) == pytest.approx(1.0)
    assert ranking_scores(queries, labels, scores, k=3)["recall_at_3"] == pytest.approx(0.5)


def test_ties_keep_input_order_and_interleaved_queries_group():
    # Equal scores: the relevant second row ranks second; rows of a query need not be adjacent.
    assert mrr_at_k(["a", "b", "a"], [0, 1, 1], [1.0, 0.0, 1.0]) == pytest.approx(0.75)
    assert recall_at_k(["a", "a"], [0, 0], [1.0, 2.0], 1) == 0.0  # no relevant: counts 0
    with pytest.raises(ValueError, match="Labels must be 0 or 1"):
        mrr_at_k(["a"], [2], [1.0])


# --- mining ----------------------------------------------------------------------------------


def test_mining_takes_the_closest_unpaired_passages(tmp_path):
    text = HEADER + "q\tp_pos\t1\nq\tp_given\t0\nr\tp_far\t1\n"
    data = read_ranking_tsv(_write(tmp_path / "t.tsv", text))
    vectors = {  # q is closest to p_pos, then p_given, then p_far; r closest to p_pos
        "q": [1.0, 0.0],
        "r": [0.0, 1.0],
        "p_pos": [1.0, 0.1],
        "p_given": [1.0, 0.5],
        "p_far": [0.0, 1.0],
    }

    def embed(texts):
        return np.array([vectors[t] for t in texts], np.float32)

    mined = mine_hard_negatives(data, embed, count=2)
    assert mined.pairs[:3] == data.pairs  # the file's pairs first, as given
    added = [(p.query, p.passage, p.label, p.line) for p in mined.pairs[3:]]
    # q: p_pos is its positive, p_given already paired -> only p_far remains.
    # r: p_pos then p_given (cosines 0.0995, 0.447: p_given first).
    assert added == [("q", "p_far", 0, 2), ("r", "p_given", 0, 4), ("r", "p_pos", 0, 4)]


# --- kbz finetune rerank / kbz predict rerank ------------------------------------------------


def _finetune_args(preset, output, *extra):
    args = ["finetune", "rerank", "--preset", str(preset), "--output", str(output)]
    args += ["--train", f"{FIXTURES}/train.tsv", "--validation", f"{FIXTURES}/dev.tsv"]
    args += ["--negatives-from", str(preset), "--num-negatives", "2", "--sequence-length", "64"]
    return args + ["--no-jit-compile", "--no-export", *map(str, extra)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tiny listwise reranker run on the fixture, negatives mined by the tiny encoder
    itself: 10 queries, groups of 3 (1 given + 2 mined negatives of 3), 2 groups a batch."""
    root = tmp_path_factory.mktemp("rerank")
    preset = save_tiny_preset(root / "tiny")
    # A random tiny encoder gives every pair nearly the same [CLS]: a large rate breaks that.
    extra = ["--batch-size", 6, "--epochs", 6, "--learning-rate", 1e-2, "--warmup-fraction", 0]
    assert main(_finetune_args(preset, root / "run", *extra)) == 0
    return root / "run"


def _epoch_losses(directory) -> list:
    """The `epoch_loss` scalars of the TensorBoard event files of `directory`, in order."""
    losses = {}
    for path in directory.glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == "epoch_loss":
                    losses[event.step] = float(tf.make_ndarray(value.tensor))
    return [losses[step] for step in sorted(losses)]


def test_listwise_run_records_its_loss_and_its_training_loss_falls(run):
    settings = json.loads((run / "run.json").read_text())["settings"]
    assert settings["ranking_loss"] == "listwise"
    losses = _epoch_losses(run / "logs" / "train")
    assert len(losses) == 6
    assert losses[0] == pytest.approx(np.log(3), abs=0.05)  # a uniform guess over 3 pairs
    assert losses[-1] < 0.8 * losses[0], losses


def test_finetune_writes_scores_ranked_lists_and_ranking_metrics(run):
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"mrr_at_10", "recall_at_1", "recall_at_10"} <= set(metrics)
    assert metrics["recall_at_10"] == 1.0  # 4 candidates per query: all within 10
    settings = json.loads((run / "run.json").read_text())["settings"]
    assert settings["num_negatives"] == 2 and settings["negatives_from"].endswith("tiny")
    dev = read_ranking_tsv(f"{FIXTURES}/dev.tsv")
    lines = (run / "predictions.tsv").read_text().splitlines()
    assert lines[0] == "query\tpassage\tlabel\tscore"
    assert [line.rsplit("\t", 1)[0] for line in lines[1:]] == [p.row for p in dev.pairs]
    scores = {
        (p.query, p.passage): float(line.rsplit("\t", 1)[1])
        for p, line in zip(dev.pairs, lines[1:], strict=True)
    }
    ranked = [
        line.split("\t") for line in (run / "predictions.ranked.tsv").read_text().splitlines()
    ]
    assert ranked[0] == ["query", "rank", "score", "passage", "label"]
    first = [row for row in ranked[1:] if row[0] == dev.pairs[0].query]
    assert [row[1] for row in first] == ["1", "2", "3", "4"]
    assert [float(row[2]) for row in first] == sorted(
        (float(row[2]) for row in first), reverse=True
    )
    assert all(abs(float(r[2]) - scores[(r[0], r[3])]) < 1e-6 for r in ranked[1:])


def test_predict_writes_rows_back_in_input_order_with_the_runs_scores(run, tmp_path):
    dev = (run / "predictions.tsv").read_text().splitlines()
    expected = {line.rsplit("\t", 2)[0]: float(line.rsplit("\t", 1)[1]) for line in dev[1:]}
    rows = [line.rsplit("\t", 2)[0] for line in dev[1:]]  # query<TAB>passage, no label
    shuffled = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    candidates = _write(tmp_path / "c.tsv", "query\tpassage\n" + "\n".join(shuffled) + "\n")
    assert main(["predict", "rerank", "--model", str(run), "--input", str(candidates),
                 "--output", str(tmp_path / "scores.tsv")]) == 0  # fmt: skip
    lines = (tmp_path / "scores.tsv").read_text().splitlines()
    assert lines[0] == "query\tpassage\tscore"
    assert [line.rsplit("\t", 1)[0] for line in lines[1:]] == shuffled
    for line in lines[1:]:
        row, score = line.rsplit("\t", 1)
        assert abs(float(score) - expected[row]) < 1e-5  # the same model, the same pairs
    assert (tmp_path / "scores.ranked.tsv").is_file()


def test_bad_files_stop_finetune_before_any_work(tmp_path, capsys):
    bad = _write(tmp_path / "dev.tsv", HEADER + "q\tp\t0\n")
    args = ["finetune", "rerank", "--preset", str(save_tiny_preset(tmp_path / "tiny"))]
    args += ["--train", f"{FIXTURES}/train.tsv", "--validation", str(bad)]
    args += ["--output", str(tmp_path / "run"), "--sequence-length", "64"]
    args += ["--negatives-from", "no_such_embedder"]
    assert main(args) == 2
    assert "--negatives-from no_such_embedder: not a preset name" in capsys.readouterr().err
    assert main(args[:-2]) == 2
    assert "query 'q' has no passage labelled 1" in capsys.readouterr().err
    positives = _write(tmp_path / "train.tsv", HEADER + "q\tp\t1\n")
    args[args.index("--train") + 1] = str(positives)
    assert main(args[:-2]) == 2
    assert "every pair is labelled 1. Add irrelevant passages" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# --- export and conversion -------------------------------------------------------------------


def test_string_pair_saved_model_scores_as_the_keras_model(run, tmp_path):
    model = kbz.from_preset(str(run / "preset"))
    assert model.task == "reranker"
    pre = kbz.BertPreprocessor.from_preset(str(run / "preset"), sequence_length=64)
    path = kbz.export_saved_model(model, tmp_path / "export" / "1", preprocessor=pre)
    queries = ["Who builds bridges?", "naïve café?", ""]
    passages = ["Civil engineers design and build bridges.", "Zürich", "empty query"]
    serving = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert sorted(serving.structured_input_signature[1]) == ["passage", "query"]
    served = serving(query=tf.constant(queries), passage=tf.constant(passages))["score"]
    expected = np.asarray(model(pre((tf.constant(queries), tf.constant(passages)))))[:, 0]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)


def _random_reranker(seed=0):
    keras.backend.clear_session()
    encoder = kbz.build_encoder(**{**TINY, "num_segments": 2})
    model = kbz.build_reranker(encoder, dropout=0.2)
    rng = np.random.default_rng(seed)
    for variable in model.weights:  # every weight random, LayerNorm scales around 1
        base = 1.0 if variable.path.endswith("/gamma") else 0.0
        variable.assign(base + rng.normal(0, 0.2, variable.shape).astype("float32"))
    return model


VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"tok{i}" for i in range(995)]
IDS = {
    "token_ids": np.array([[2, 50, 60, 3, 70, 80, 90, 3], [2, 51, 3, 71, 3, 0, 0, 0]], np.int32),
    "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0, 0]], np.int32),
    "padding_mask": np.array([[1] * 8, [1] * 5 + [0] * 3], np.int32),
}


def _transformers_logits(directory):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(IDS["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(IDS["padding_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(IDS["segment_ids"], dtype=torch.long),
        )
    return out.logits.numpy(), model


@pytest.mark.e2e
def test_reranker_to_cross_encoder_and_back(tmp_path):
    model = _random_reranker()
    preset = kbz.save_preset(model, tmp_path / "ours", vocabulary=VOCABULARY, lowercase=True)
    hf = kbz.checkpoints.export_huggingface(preset, tmp_path / "hf")
    config = json.loads((hf / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["num_labels"] == 1 and config["classifier_dropout"] == 0.2
    assert config["sentence_transformers"]["activation_fn"].endswith("Identity")
    theirs, _ = _transformers_logits(hf)
    ours = np.asarray(model(IDS))
    np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0)
    assert np.abs(ours).max() > 0.1
    back = kbz.checkpoints.convert(hf, tmp_path / "back")
    restored = kbz.from_preset(str(back))
    assert restored.task == "reranker" and restored.task_config == {"dropout": 0.2}
    np.testing.assert_array_equal(np.asarray(restored(IDS)), ours)


@pytest.mark.e2e
def test_cross_encoder_from_transformers_converts_to_a_reranker(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(VOCABULARY), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=1,
    )  # fmt: skip
    config.sbert_ce_default_activation_function = "torch.nn.modules.activation.Sigmoid"
    network = transformers.BertForSequenceClassification(config)
    with torch.no_grad():  # a trained-looking head and LayerNorms, not the 0/1 initial ones
        for parameter in network.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    network.save_pretrained(tmp_path / "ce")
    (tmp_path / "ce" / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    theirs, _ = _transformers_logits(tmp_path / "ce")
    preset = kbz.checkpoints.convert(tmp_path / "ce", tmp_path / "ours")
    model = kbz.from_preset(str(preset))
    assert model.task == "reranker"
    np.testing.assert_allclose(np.asarray(model(IDS)), theirs, atol=1e-5, rtol=0)
    # Without CrossEncoder's marker, one label stays a regression classifier.
    del config.sbert_ce_default_activation_function
    config.problem_type = "regression"
    network.config = config
    network.save_pretrained(tmp_path / "regression")
    (tmp_path / "regression" / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    preset = kbz.checkpoints.convert(tmp_path / "regression", tmp_path / "ours_regression")
    assert kbz.presets.load_preset_config(str(preset)).task == "classifier"


# --- listwise training -----------------------------------------------------------------------


def test_group_scorer_scores_each_pair_as_the_reranker():
    model = _random_reranker()
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 9, size=(2, 3))
    mask = (np.arange(8) < lengths[..., None]).astype(np.int32)  # [2 groups, 3, 8]
    groups = {
        "token_ids": rng.integers(5, 1000, size=(2, 3, 8)).astype(np.int32) * mask,
        "segment_ids": (np.arange(8) >= 2).astype(np.int32) * mask,
        "padding_mask": mask,
    }
    scorer = kbz.tasks.build_group_scorer(model, group_size=3)
    assert len(scorer.weights) == len(model.weights)  # no weights of its own
    grouped = np.asarray(scorer(groups, training=False))
    pairs = np.asarray(model({k: v.reshape(6, 8) for k, v in groups.items()}, training=False))
    assert grouped.shape == (2, 3)
    np.testing.assert_allclose(grouped, pairs.reshape(2, 3), atol=1e-6)
    assert np.ptp(grouped) > 0.01  # the pairs score differently: the order is tested


def test_listwise_loss_is_softmax_cross_entropy_of_the_first_pair():
    logits = np.array([[2.0, 1.0, -1.0], [0.0, 3.0, 0.5]], np.float32)
    expected = np.mean([-np.log(np.exp(r[0]) / np.exp(r).sum()) for r in logits])
    loss = kbz.tasks.listwise_loss()(np.zeros(2, np.int32), logits)
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    shifted = kbz.tasks.listwise_loss()(np.zeros(2, np.int32), logits + 5.0)
    assert float(shifted) == pytest.approx(expected, rel=1e-5)  # a shared bias cancels


def _pairs(rows):
    return [RankingPair(q, p, label, line) for line, (q, p, label) in enumerate(rows, start=2)]


def test_query_groups_lead_with_the_relevant_pair_and_skip_queries_without_negatives():
    pairs = _pairs(
        [("a", "a1", 1), ("a", "n1", 0), ("b", "b1", 1), ("a", "n2", 0), ("a", "a2", 1),
         ("c", "c1", 1), ("d", "n3", 0), ("a", "n3", 0), ("b", "n4", 0)]
    )  # fmt: skip
    groups = query_groups(pairs, num_negatives=2, seed=0)
    assert groups.without_negatives == 1 and groups.without_relevant == 1  # c; d
    rows = groups.indices.tolist()
    assert [row[0] for row in rows] == [0, 4, 2]  # a's positives, then b's
    for row in rows[:2]:  # 2 of a's 3 negatives, without repeats, in file order
        assert set(row[1:]) <= {1, 3, 7} and row[1] < row[2]
    assert rows[2] == [2, 8, 8]  # b has one negative: drawn again
    again = query_groups(pairs, num_negatives=2, seed=0).indices
    np.testing.assert_array_equal(again, groups.indices)
    draws = {tuple(map(tuple, query_groups(pairs, 2, seed).indices)) for seed in range(8)}
    assert len(draws) > 1  # the seed draws a's negatives
    assert query_groups(pairs[6:7], 2, 0).indices.shape == (0, 3)


def test_listwise_training_arrays_group_the_pairs(tmp_path):
    pre = kbz.BertPreprocessor.from_preset(str(save_tiny_preset(tmp_path / "t")), 64)
    text = HEADER + "q\tgood\t1\nq\tbad one\t0\nq\tbad two\t0\nr\tyes\t1\nr\tno\t0\n"
    job = RerankingTask(pre, num_negatives=2)
    data = job.read(_write(tmp_path / "t.tsv", text))
    x, y = job.training_arrays(data, seed=0)
    pairs, _, _ = job.arrays(data)
    assert x["token_ids"].shape == (2, 3, 64) and y.tolist() == [0, 0]
    np.testing.assert_array_equal(x["token_ids"][0], pairs["token_ids"][[0, 1, 2]])
    np.testing.assert_array_equal(x["token_ids"][1], pairs["token_ids"][[3, 4, 4]])
    lengths = kbz.training.batching.real_lengths(x)
    assert lengths.tolist() == [pairs["padding_mask"][:3].sum(-1).max(), 5]
    assert job.training_rows(6) == 2 and job.training_group_size() == 3
    with pytest.raises(ValueError, match=r"--batch-size 8 must be a multiple of 3.*Pass --b"):
        job.training_rows(8)
    pointwise = RerankingTask(pre, ranking_loss="pointwise", num_negatives=2)
    x, y = pointwise.training_arrays(data, seed=0)
    assert x["token_ids"].shape == (5, 64) and y.tolist() == [1, 0, 0, 1, 0]
    assert pointwise.training_rows(8) == 8
    with pytest.raises(ValueError, match=r"`ranking_loss` \(--ranking-loss\) must be one of"):
        RerankingTask(pre, ranking_loss="listnet")


def test_pointwise_run_and_bad_loss_flags(tmp_path, capsys):
    preset = save_tiny_preset(tmp_path / "tiny")
    with pytest.raises(SystemExit):
        main(_finetune_args(preset, tmp_path / "bad", "--ranking-loss", "listnet"))
    assert "--ranking-loss: invalid choice: 'listnet'" in capsys.readouterr().err
    assert main(_finetune_args(preset, tmp_path / "bad", "--batch-size", 8)) == 2
    assert "--batch-size 8 must be a multiple of 3" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    args = _finetune_args(preset, tmp_path / "run", "--batch-size", 8, "--epochs", 1)
    assert main([*args, "--ranking-loss", "pointwise"]) == 0
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert settings["ranking_loss"] == "pointwise"
    assert "mrr_at_10" in json.loads((tmp_path / "run" / "metrics.json").read_text())
