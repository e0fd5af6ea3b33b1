"""The fine-tuning recipe step for step against Hugging Face transformers' own training loop.

Outcome parity over seeds (benchmarks/time_to_accuracy.py) cannot tell a recipe bug from seed
noise. This test can: from the real MiniLM checkpoint, with every dropout off and the same
new classifier head, ten steps of `kbz.training.create_optimizer` (AdamW, weight decay 0.01
without LayerNorm weights and biases, epsilon 1e-6, global-norm clip 1.0, linear warmup and
decay) through Keras' `fit` under XLA must follow the loop of transformers' examples
(`torch.optim.AdamW` with the same groups, `get_linear_schedule_with_warmup`,
`clip_grad_norm_`) on the same batches: the same loss at every step and the same logits on
sentences neither saw. A recipe difference (schedule off by one step, clipping per variable,
decay on LayerNorm, another epsilon, loss reduction) moves them by far more than the
tolerance; 32-bit arithmetic in two frameworks moves them by less (measured on this CPU:
losses within 1e-5, logits within 2e-5; Keras' own AdamW, whose epsilon acts on the
uncorrected second moment, is 3e-4 to 1e-3 off in loss from the third step, see
`kbz.training.AdamW`).

The tagger and the question answerer get the same check, which also pins what is task-specific:
the tagger's labels on the first sub-word of each word (transformers' `word_ids()` rule, other
positions -100) and its loss, the mean over labelled tokens of the batch, through the bucketed
batches `kbz finetune` trains on (`training.batching`, trimmed to their bucket; transformers
pads each batch to its longest); the answerer's windows, start/end positions and loss, the mean
of the start and end cross-entropies (`BertForQuestionAnswering`).
"""

import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bert_zoo as kbz
from keras_bert_zoo.tasks.question_answerer.task import QuestionAnsweringTask
from keras_bert_zoo.tasks.tagger.task import TaggingTask
from keras_bert_zoo.training import batching
from keras_bert_zoo.training.optimizers import create_optimizer

pytestmark = pytest.mark.e2e  # reference parity: transformers' own training loop beside ours
# The Hugging Face side of the benchmarks' recipe (imports only the standard library until
# called): the test checks the very optimizer that benchmarks/time_to_accuracy.py runs.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from time_to_accuracy import _squad_examples, _squad_features, hf_optimizer, read_sst2  # noqa: E402,I001
import whole_run_parity  # noqa: E402

STEPS, BATCH, LENGTH, LEARNING_RATE = 10, 8, 64, 5e-5


def _hf_run(torch, transformers, minilm_dir, x, labels, heldout):
    """transformers' side: the examples' plain loop; returns (per-step losses, head, logits)."""
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        minilm_dir,
        num_labels=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout=0.0,
    )
    head = (
        model.classifier.weight.detach().numpy().T.copy(),
        model.classifier.bias.detach().numpy().copy(),
    )
    optimizer, schedule = hf_optimizer(model, LEARNING_RATE, STEPS)

    def inputs(source, rows):
        length = int(source["padding_mask"][rows].sum(-1).max())  # pad to the batch's longest
        return {
            "input_ids": torch.tensor(source["token_ids"][rows, :length], dtype=torch.long),
            "token_type_ids": torch.tensor(source["segment_ids"][rows, :length], dtype=torch.long),
            "attention_mask": torch.tensor(source["padding_mask"][rows, :length]),
        }

    rows = [slice(step * BATCH, (step + 1) * BATCH) for step in range(STEPS)]
    batches = [{**inputs(x, r), "labels": torch.tensor(labels[r])} for r in rows]
    losses = whole_run_parity.torch_loop(torch, model, batches, optimizer, schedule)
    with torch.no_grad():
        rows = slice(0, len(heldout["token_ids"]))
        logits = model(**inputs(heldout, rows)).logits.numpy()
    return losses, head, logits


class StepLosses(keras.callbacks.Callback):
    """Each step's own loss (Keras logs the epoch's running mean)."""

    def __init__(self):
        super().__init__()
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))

    def losses(self):
        means = np.array(self.means)
        steps = np.arange(1, len(means) + 1)
        return means * steps - np.concatenate([[0.0], means[:-1] * steps[:-1]])


def test_finetuning_steps_follow_transformers_loop(minilm_dir, minilm_preset):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    preprocessor = kbz.BertPreprocessor.from_preset(minilm_preset, sequence_length=LENGTH)
    sentences, sentence_labels = read_sst2(ROOT / "examples/data/sst2_sample.tsv")
    texts, labels = sentences[: STEPS * BATCH], np.array(sentence_labels[: STEPS * BATCH])
    heldout_texts = sentences[STEPS * BATCH : STEPS * BATCH + 16]
    x = {k: np.asarray(v) for k, v in preprocessor(texts).items()}
    heldout = {k: np.asarray(v) for k, v in preprocessor(heldout_texts).items()}
    assert x["padding_mask"].sum(-1).max() < LENGTH  # nothing truncated: the same tokens

    hf_losses, (kernel, bias), hf_logits = _hf_run(
        torch, transformers, str(minilm_dir), x, labels, heldout
    )

    keras.utils.set_random_seed(0)
    model = kbz.from_preset(minilm_preset, task="classifier", num_classes=2)
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    model.get_layer("classifier_head").set_weights([kernel, bias])
    model.compile(
        optimizer=create_optimizer(LEARNING_RATE, STEPS, warmup_fraction=0.1),
        loss=kbz.tasks.classifier_loss(2),
        jit_compile=True,
    )
    untrained = np.asarray(model.predict(heldout, batch_size=16, verbose=0))
    steps = StepLosses()
    model.fit(x, labels, batch_size=BATCH, shuffle=False, epochs=1, verbose=0, callbacks=[steps])
    logits = np.asarray(model.predict(heldout, batch_size=16, verbose=0))

    assert int(model.optimizer.iterations) == STEPS
    np.testing.assert_allclose(steps.losses(), hf_losses, rtol=0, atol=5e-5)
    np.testing.assert_allclose(logits, hf_logits, rtol=0, atol=2e-4)
    # the steps moved the logits far beyond the tolerance: not two untrained models compared
    assert np.abs(logits - untrained).max() > 50 * 2e-4


def _hf_steps(torch, model, batches):
    """transformers' examples loop over `batches` (model inputs with labels): per-step losses."""
    optimizer, schedule = hf_optimizer(model, LEARNING_RATE, STEPS)
    return whole_run_parity.torch_loop(torch, model, batches, optimizer, schedule)


def _torch_inputs(torch, source, rows):
    """Rows of kbz inputs as transformers' inputs, padded to the rows' longest."""
    length = int(source["padding_mask"][rows].sum(-1).max())
    return {
        "input_ids": torch.tensor(source["token_ids"][rows, :length], dtype=torch.long),
        "token_type_ids": torch.tensor(source["segment_ids"][rows, :length], dtype=torch.long),
        "attention_mask": torch.tensor(source["padding_mask"][rows, :length]),
    }


def _kbz_model(minilm_preset, task, head, weights, loss, **task_kwargs):
    """Our task model with every dropout off, the reference's new head, and the recipe."""
    keras.utils.set_random_seed(0)
    model = kbz.from_preset(minilm_preset, task=task, **task_kwargs)
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    model.get_layer(head).set_weights(weights)
    model.compile(
        optimizer=create_optimizer(LEARNING_RATE, STEPS, warmup_fraction=0.1),
        loss=loss,
        jit_compile=True,
    )
    return model


def _reference_word_labels(tokenizer, words, tags):
    """transformers' run_ner.py alignment: ids, and each word's tag on its first sub-token."""
    encoded = tokenizer(words, is_split_into_words=True)
    labels, previous = [], None
    for word in encoded.word_ids():
        labels.append(int(tags[word]) if word is not None and word != previous else -100)
        previous = word
    return encoded["input_ids"], labels


def test_tagger_steps_follow_transformers_loop(minilm_dir, minilm_preset):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    preprocessor = kbz.BertPreprocessor.from_preset(minilm_preset, sequence_length=LENGTH)
    job = TaggingTask(preprocessor)
    dataset = job.read(ROOT / "examples/data/wnut17_train_sample.conll")
    x, labels, _ = job.arrays(dataset)
    lengths = batching.real_lengths(x)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    rows = []  # sentences that fit (truncation differs: kbz cuts whole words, transformers not)
    for row in range(len(dataset.sentences)):
        ids, reference_labels = _reference_word_labels(
            tokenizer, dataset.sentences[row].words, dataset.tag_ids[row]
        )
        if len(ids) > LENGTH:
            continue
        rows.append(row)
        assert x["token_ids"][row, : lengths[row]].tolist() == ids
        assert labels[row, : lengths[row]].tolist() == reference_labels
        assert (labels[row, lengths[row] :] == -100).all()
    rows = np.array(rows)

    # The batches `kbz finetune` trains on: bucketed, each trimmed to its bucket's length.
    train, heldout = rows[:240], rows[240:256]
    x_train = {key: value[train] for key, value in x.items()}
    schedule = batching.BatchSchedule(
        lengths[train], BATCH, batching.bucket_lengths(LENGTH), seed=0
    )
    assert schedule.steps_per_epoch >= STEPS and len(set(schedule.epoch(0)[1][:STEPS])) > 1
    stream = batching.training_stream(x_train, labels[train], schedule, sequence_targets=True)
    batches = [schedule.batch(step)[0] for step in range(STEPS)]

    torch.manual_seed(0)
    reference = transformers.AutoModelForTokenClassification.from_pretrained(
        str(minilm_dir),
        num_labels=len(dataset.tag_names),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout=0.0,
    )
    head = [reference.classifier.weight.detach().numpy().T.copy()]
    head.append(reference.classifier.bias.detach().numpy().copy())
    hf_losses = _hf_steps(
        torch,
        reference,
        [
            {
                **_torch_inputs(torch, x_train, indices),
                "labels": torch.tensor(
                    labels[train][indices, : int(lengths[train][indices].max())],
                    dtype=torch.long,
                ),
            }
            for indices in batches
        ],
    )
    held = {key: value[heldout] for key, value in x.items()}
    with torch.no_grad():
        hf_logits = reference(**_torch_inputs(torch, held, slice(None))).logits.numpy()

    # transformers' per-batch mean over labelled tokens: the step-for-step reference
    model = _kbz_model(
        minilm_preset, "tagger", "tagger_head", head, kbz.tasks.tagger_loss(), num_tags=len(head[1])
    )
    untrained = np.asarray(model.predict(held, batch_size=16, verbose=0))
    # `kbz finetune`'s loss divides the same sum by a fixed count instead (what bucketing needs)
    first_x, first_y = next(iter(stream(0)))
    fixed = job.loss(dataset)
    count = np.mean([len(s.words) for s in dataset.sentences])
    assert fixed.labelled_per_sequence == pytest.approx(count)
    ratio = (np.asarray(first_y) != -100).sum() / (BATCH * count)
    assert float(fixed(first_y, model(first_x))) == pytest.approx(hf_losses[0] * ratio, abs=5e-5)
    steps = StepLosses()
    model.fit(stream(0), steps_per_epoch=STEPS, epochs=1, verbose=0, callbacks=[steps])
    logits = np.asarray(model.predict(held, batch_size=16, verbose=0))

    real = held["padding_mask"][:, : hf_logits.shape[1]].astype(bool)
    assert int(model.optimizer.iterations) == STEPS
    np.testing.assert_allclose(steps.losses(), hf_losses, rtol=0, atol=5e-5)
    np.testing.assert_allclose(logits[:, : hf_logits.shape[1]][real], hf_logits[real], atol=2e-4)
    assert np.abs(logits - untrained)[held["padding_mask"].astype(bool)].max() > 50 * 2e-4


def test_tagger_whole_run_follows_transformers_loop(minilm_dir, minilm_preset):
    """Two whole epochs (`benchmarks/whole_run_parity.py` on a slice): the schedule to its end,
    the reshuffle between epochs and the rounding that builds up over a run. 64 sentences,
    batch 8 (8 steps an epoch), the reference's order, dropout off, learning rate 1e-4 so
    that the slice learns: every step's loss and the held-out logits as in the ten-step test
    (measured on this CPU: losses within 1.3e-5 at 5e-5 over 16 steps)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    args = whole_run_parity.parse(
        ["--limit", "64", "--batch-size", "8", "--epochs", "2", "--learning-rate", "1e-4",
         "--heldout", str(ROOT / "examples/data/wnut17_dev_sample.conll"),
         "--checkpoint", str(minilm_dir), "--preset", str(minilm_preset)]
    )  # fmt: skip
    run = whole_run_parity.tagger_run(args, 0, "none", ("reference", "kbz"))
    assert run["aligned"] == run["sentences"] == 64  # every label checked against word_ids()
    assert run["reference_steps"] == run["kbz_steps"] == 16
    reference, ours = np.array(run["reference_losses"]), np.array(run["kbz_losses"])
    np.testing.assert_allclose(ours, reference, rtol=0, atol=5e-5)
    assert reference[-4:].mean() < 0.6 * reference[:4].mean()  # both trained, not stood still
    assert run["max_logit_difference"] < 2e-4
    assert run["kbz_f1"] == pytest.approx(run["reference_f1"], abs=0.01)


QA_LENGTH = 128  # room for a question (at most 64 tokens) and a window of its context


def _qa_windows(transformers, minilm_dir, minilm_preset):
    """Our QA features of 300 training questions, checked against run_qa.py's windows."""
    path = ROOT / "examples/data/squad_train_sample.json"
    preprocessor = kbz.BertPreprocessor.from_preset(minilm_preset, sequence_length=QA_LENGTH)
    job = QuestionAnsweringTask(preprocessor, doc_stride=64)
    examples = job.read(path)[:300]
    x, targets, features = job.arrays(examples)
    # transformers' run_qa.py windows (its stride is their overlap: the benchmark sets it per
    # question length, `_squad_windows`) are ours, token for token, with the same answers
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    args = type("Recipe", (), {"sequence_length": QA_LENGTH, "doc_stride": 64})
    windows, mapping, _ = _squad_features(tokenizer, _squad_examples(path)[:300], args, True)
    np.testing.assert_array_equal(mapping, features.example_index)
    np.testing.assert_array_equal(windows["input_ids"].numpy(), x["token_ids"])
    np.testing.assert_array_equal(windows["token_type_ids"].numpy(), x["segment_ids"])
    np.testing.assert_array_equal(windows["start_positions"].numpy(), targets["start_logits"])
    np.testing.assert_array_equal(windows["end_positions"].numpy(), targets["end_logits"])
    assert len(features.example_index) > len(examples)  # contexts cut into several windows
    # Windows without padding: the reference's softmax runs over every position, padding
    # included, ours over real tokens only; on full windows they are the same positions.
    rows = np.flatnonzero(x["padding_mask"].sum(-1) == QA_LENGTH)
    assert 0 < (targets["start_logits"][rows[: STEPS * BATCH]] > 0).mean() < 1  # both kinds
    return job, examples, x, targets, rows


def test_question_answerer_windows_match_run_qa(minilm_dir, minilm_preset):
    transformers = pytest.importorskip("transformers")
    _qa_windows(transformers, minilm_dir, minilm_preset)


def test_question_answerer_steps_follow_transformers_loop(minilm_dir, minilm_preset):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    job, examples, x, targets, rows = _qa_windows(transformers, minilm_dir, minilm_preset)
    train, heldout = rows[: STEPS * BATCH], rows[STEPS * BATCH : STEPS * BATCH + 16]
    assert len(heldout) == 16
    x_train = {key: value[train] for key, value in x.items()}
    y_train = {key: value[train] for key, value in targets.items()}
    held = {key: value[heldout] for key, value in x.items()}

    torch.manual_seed(0)
    reference = transformers.AutoModelForQuestionAnswering.from_pretrained(
        str(minilm_dir), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    head = [reference.qa_outputs.weight.detach().numpy().T.copy()]
    head.append(reference.qa_outputs.bias.detach().numpy().copy())
    batches = []
    for step in range(STEPS):
        indices = slice(step * BATCH, (step + 1) * BATCH)
        batch = _torch_inputs(torch, x_train, indices)
        for key in ("start", "end"):
            positions = y_train[f"{key}_logits"][indices]
            batch[f"{key}_positions"] = torch.tensor(positions, dtype=torch.long)
        batches.append(batch)
    hf_losses = _hf_steps(torch, reference, batches)
    with torch.no_grad():
        out = reference(**_torch_inputs(torch, held, slice(None)))
    hf_logits = np.stack([out.start_logits.numpy(), out.end_logits.numpy()])

    model = _kbz_model(minilm_preset, "question_answerer", "span_head", head, job.loss(examples))

    def predict():
        outputs = model.predict(held, batch_size=16, verbose=0)
        return np.stack([outputs["start_logits"], outputs["end_logits"]])

    untrained = predict()
    steps = StepLosses()
    model.fit(
        x_train, y_train, batch_size=BATCH, shuffle=False, epochs=1, verbose=0, callbacks=[steps]
    )
    logits = predict()

    assert int(model.optimizer.iterations) == STEPS
    np.testing.assert_allclose(steps.losses(), hf_losses, rtol=0, atol=5e-5)
    np.testing.assert_allclose(logits, hf_logits, rtol=0, atol=2e-4)
    assert np.abs(logits - untrained).max() > 50 * 2e-4
