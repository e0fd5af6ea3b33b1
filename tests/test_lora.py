"""LoRA (`kbz.enable_lora`): what trains, merging, adapter files, and `kbz finetune --lora-rank`
with exact resume. Tiny random models and the bundled SST-2 head."""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import TINY, UNCASED_VOCABULARY, Kill, random_inputs, save_tiny_preset
from safetensors.numpy import load_file, save_file

import keras_bert_zoo as kbz
from keras_bert_zoo import lora
from keras_bert_zoo.cli import main
from keras_bert_zoo.jobs import finetune as runs
from keras_bert_zoo.jobs.validation import ValidationCallback
from keras_bert_zoo.saving.adapters import read_lora_file
from keras_bert_zoo.training.checkpoint_files import load_weights_file, write_arrays

DATA = Path(__file__).parent / "data" / "finetune"

HIDDEN, INNER, LAYERS, CLASSES = TINY["hidden_dim"], TINY["intermediate_dim"], TINY["num_layers"], 3


def _classifier(seed=0, dtype=None):
    keras.utils.set_random_seed(seed)
    encoder = kbz.build_encoder(**TINY, dtype=dtype)
    return kbz.build_classifier(encoder, CLASSES, dropout=0.0)


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _values(model) -> dict:
    return {v.path: _numpy(v).copy() for v in model.weights}


def _train(model, steps=3, learning_rate=1e-2):
    model.compile(keras.optimizers.Adam(learning_rate), kbz.tasks.classifier_loss(CLASSES))
    x = random_inputs(batch=8, length=12, seed=1, lengths=[12, 11, 10, 9, 8, 7, 6, 5])
    y = np.arange(8) % CLASSES
    for _ in range(steps):
        model.train_on_batch(x, y)
    return x


@pytest.mark.parametrize(
    "targets, shapes",
    [
        ("all", [(HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, INNER), (INNER, HIDDEN)]),
        ("attention", [(HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN)]),
        (["attention_qkv"], [(HIDDEN, 3 * HIDDEN)]),
    ],
)
def test_trainable_parameters_are_the_adapters_the_pooler_and_the_head(targets, shapes):
    model = kbz.enable_lora(_classifier(), rank=4, targets=targets)
    adapters = LAYERS * sum(4 * (fan_in + fan_out) for fan_in, fan_out in shapes)
    pooler, head = HIDDEN * HIDDEN + HIDDEN, HIDDEN * CLASSES + CLASSES
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    assert trainable == adapters + pooler + head
    assert {v.path.split("/")[0] for v in model.trainable_variables if "lora" not in v.path} == {
        "pooled_dense",
        "classifier_head",
    }


def test_a_fit_step_changes_only_the_adapters_and_the_head():
    model = kbz.enable_lora(_classifier(), rank=4)
    before = _values(model)
    _train(model)
    after = _values(model)
    changed = {p for p in before if not np.array_equal(before[p], after[p])}
    expected = {v.path for v in model.trainable_variables}
    # lora_kernel_a of a layer only moves once its lora_kernel_b (zero at first) has
    assert changed - {p for p in expected if "seed_generator" in p} == expected
    for variable in lora.base_kernels(model):
        np.testing.assert_array_equal(_numpy(variable), before[variable.path])


def test_merged_model_equals_the_lora_model_and_has_no_lora_variables():
    base = _classifier()
    x = random_inputs(batch=3, length=12)
    base_logits = _numpy(base(x))
    model = kbz.enable_lora(_classifier(), rank=4, alpha=8)
    _train(model)
    merged = kbz.merge_lora(model)
    assert not any("lora" in v.path for v in merged.weights)
    assert [v.path for v in merged.weights] == [v.path for v in base.weights]
    np.testing.assert_allclose(_numpy(merged(x)), _numpy(model(x)), atol=1e-5)
    assert np.abs(_numpy(merged(x)) - base_logits).max() > 1e-3  # the adapters did something


def test_adapter_file_round_trip_into_a_fresh_base(tmp_path):
    encoder = kbz.encoder.find_encoder(_classifier(seed=0))  # the base a preset holds
    tokens = UNCASED_VOCABULARY.read_text().splitlines()[: TINY["vocabulary_size"]]
    preset = kbz.save_preset(encoder, tmp_path / "base", vocabulary=tokens, lowercase=True)
    model = kbz.from_preset(preset, task="classifier", num_classes=CLASSES, dropout=0.0)
    kbz.enable_lora(model, rank=2, targets="attention")
    x = _train(model)
    path = kbz.save_lora_weights(model, tmp_path / "adapter.safetensors")
    stored = load_file(path)
    lora_count = LAYERS * 2 * 2  # two projections per layer, A and B each
    assert sum("lora_kernel" in k for k in stored) == lora_count
    assert set(stored) == {v.path for v in model.trainable_variables}  # nothing frozen
    fresh = kbz.from_preset(preset, task="classifier", num_classes=CLASSES, dropout=0.0)
    kbz.load_lora_weights(fresh, path)
    assert lora.lora_settings(fresh) == {
        "rank": 2,
        "alpha": 2.0,
        "targets": ["attention_qkv", "attention_output"],
    }
    np.testing.assert_allclose(_numpy(fresh(x)), _numpy(model(x)), atol=1e-6)


def test_an_adapter_is_refused_by_another_base(tmp_path):
    model = kbz.enable_lora(_classifier(seed=0), rank=2)
    _train(model, steps=1)
    path = kbz.save_lora_weights(model, tmp_path / "adapter.safetensors")
    with pytest.raises(ValueError, match="trained on other base weights.*sha256 mismatch"):
        kbz.load_lora_weights(_classifier(seed=1), path)
    keras.utils.set_random_seed(0)
    wider = kbz.build_classifier(kbz.build_encoder(**{**TINY, "num_layers": 1}), CLASSES)
    with pytest.raises(ValueError, match=r"another architecture.*'num_layers': \(2, 1\)"):
        kbz.load_lora_weights(wider, path)
    assert not lora.lora_layers(wider)  # refused before anything was changed
    with pytest.raises(ValueError, match="has no LoRA adapters to save"):
        kbz.save_lora_weights(_classifier(), tmp_path / "none.safetensors")


def test_an_adapter_from_before_attention_dropout_loads(tmp_path):
    """Files written before the architecture had `attention_dropout` lack it: None, the same
    rate as `dropout`; another attention dropout is another architecture."""
    model = kbz.enable_lora(_classifier(seed=0), rank=2)
    path = kbz.save_lora_weights(model, tmp_path / "adapter.safetensors")
    metadata, tensors = read_lora_file(path)
    architecture = json.loads(metadata["architecture"])
    assert architecture.pop("attention_dropout") == 0.1
    old = tmp_path / "old.safetensors"
    save_file(tensors, str(old), metadata={**metadata, "architecture": json.dumps(architecture)})
    kbz.load_lora_weights(_classifier(seed=0), old)
    keras.utils.set_random_seed(0)
    other = kbz.build_classifier(kbz.build_encoder(**TINY, attention_dropout=0.0), CLASSES)
    with pytest.raises(
        ValueError, match=r"another architecture.*'attention_dropout': \(0.1, 0.0\)"
    ):
        kbz.load_lora_weights(other, old)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(rank=0), "`rank` must be a positive integer"),
        (dict(rank=4, alpha=-1), "`alpha` must be a positive number"),
        (dict(rank=4, targets="query"), "`targets` must be one of"),
    ],
)
def test_bad_lora_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        kbz.enable_lora(_classifier(), **kwargs)


def test_lora_twice_is_an_error():
    model = kbz.enable_lora(_classifier(), rank=2)
    with pytest.raises(ValueError, match="already has LoRA adapters"):
        kbz.enable_lora(model, rank=2)


def test_checkpoint_files_keep_the_adapters_and_the_frozen_base(tmp_path):
    """Keras' Dense saves an adapted kernel merged and zeroes the adapter when loading:
    `load_weights_file` puts the base kernel and the adapters back as they were."""
    model = kbz.enable_lora(_classifier(), rank=2)
    _train(model)
    saved = _values(model)
    model.save_weights(tmp_path / "w.weights.h5")
    write_arrays(tmp_path / "a.npz", lora.lora_variables(model))
    _train(model, steps=2)
    load_weights_file(
        model, tmp_path / "w.weights.h5", tmp_path / "a.npz", lora.lora_variables(model)
    )
    for path, value in _values(model).items():
        np.testing.assert_array_equal(value, saved[path], err_msg=path)


def test_mixed_precision_lora_trains_finite_and_merges():
    model = kbz.enable_lora(_classifier(dtype="mixed_bfloat16"), rank=4)
    assert all(v.dtype == "float32" for v in lora.lora_variables(model))
    x = _train(model, steps=2)
    logits = _numpy(model(x))
    assert np.isfinite(logits).all()
    np.testing.assert_allclose(_numpy(kbz.merge_lora(model)(x)), logits, atol=2e-2)


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset", max_sequence_length=64)


def _head(tmp_path, count):
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines(True)[:count]
    path = tmp_path / f"head{count}.tsv"
    path.write_text("".join(lines))
    return path


def test_finetune_classify_with_lora_writes_a_plain_model_and_the_adapter(tiny_preset, tmp_path):
    train, output = _head(tmp_path, 65), tmp_path / "out"
    flags = ["--batch-size", "16", "--sequence-length", "32", "--epochs", "1", "--no-jit-compile"]
    command = ["finetune", "classify", "--preset", str(tiny_preset), "--train", str(train)]
    command += ["--validation", str(train), "--output", str(output), *flags, "--lora-rank", "4"]
    assert main(command) == 0
    settings = json.loads((output / "run.json").read_text())["settings"]
    assert (settings["lora_rank"], settings["learning_rate"]) == (4, 5e-4)  # LoRA's default
    preset_weights = load_file(output / "preset" / "model.weights.safetensors")
    assert not any("lora" in key for key in preset_weights)
    reloaded = kbz.load_model(output / "model.keras")
    assert not any("lora" in v.path for v in reloaded.weights)
    assert (output / "export" / "1" / "saved_model.pb").is_file()
    x = random_inputs(batch=2, length=16, vocabulary_size=30522)
    restored = kbz.from_preset(str(output / "preset"), task="classifier")
    with_adapter = kbz.from_preset(str(tiny_preset), task="classifier", num_classes=2)
    kbz.load_lora_weights(with_adapter, output / "adapter.safetensors")
    for model in (restored, with_adapter):
        np.testing.assert_allclose(_numpy(model(x)), _numpy(reloaded(x)), atol=1e-5)


def test_lora_flags_are_checked_before_any_work(tiny_preset, tmp_path, capsys):
    command = ["finetune", "classify", "--preset", str(tiny_preset), "--train", "x.tsv"]
    command += ["--validation", "x.tsv", "--output", str(tmp_path / "out")]
    assert main([*command, "--lora-rank", "0"]) == 2
    assert "--lora-rank must be a positive integer. Received: 0" in capsys.readouterr().err
    assert main([*command, "--lora-alpha", "16"]) == 2
    assert "--lora-alpha must be a positive number and needs --lora-rank" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


def _finetune(preset, train, output):
    return runs.run_finetune(
        "classifier", str(preset), str(train), str(train), str(output), epochs=2,
        batch_size=16, sequence_length=32, checkpoint_every=2, export=False, verbose=0,
        lora_rank=4, jit_compile=False, bucketing=False, keep="last",
    )  # fmt: skip


@pytest.mark.e2e  # a kill, then the run again
def test_an_interrupted_lora_run_resumes_to_the_uninterrupted_weights(
    tiny_preset, tmp_path, monkeypatch
):
    train = _head(tmp_path, 49)  # 3 steps per epoch, 6 in intervals of 2
    _finetune(tiny_preset, train, tmp_path / "straight")
    monkeypatch.setattr(runs, "tensorboard", lambda output: Kill(step=5))
    with pytest.raises(KeyboardInterrupt):
        _finetune(tiny_preset, train, tmp_path / "interrupted")
    monkeypatch.undo()
    _finetune(tiny_preset, train, tmp_path / "interrupted")
    for name in ("adapter.safetensors", "preset/model.weights.safetensors"):
        straight = load_file(tmp_path / "straight" / name)
        resumed = load_file(tmp_path / "interrupted" / name)
        assert straight.keys() == resumed.keys()
        for key in straight:
            np.testing.assert_allclose(resumed[key], straight[key], atol=1e-6, err_msg=key)
    adapter = load_file(tmp_path / "straight" / "adapter.safetensors")
    assert np.abs(adapter["transformer_layer_0/output_dense/lora_kernel_b"]).max() > 0


def test_the_best_epoch_of_a_lora_run_is_restored_with_its_adapters(tmp_path):
    """`--keep best` reloads an earlier epoch: its adapters, not merged kernels and zeros."""
    model = kbz.enable_lora(_classifier(), rank=2)
    scores = iter([0.9, 0.5])  # epoch 1 is the best
    callback = ValidationCallback(lambda network: {"accuracy": next(scores)}, tmp_path)
    callback.set_model(model)
    _train(model)
    best = _values(model)
    callback.on_epoch_end(0)
    _train(model)
    callback.on_epoch_end(1)
    assert callback.restore_best()["epoch"] == 1
    for path, value in _values(model).items():
        np.testing.assert_array_equal(value, best[path], err_msg=path)


def test_finetune_embed_with_lora_writes_a_merged_embedder_and_the_adapter(tmp_path):
    from test_embedder import SQUAD_SUBSET, _squad_pairs, _tiny_preset

    rows = _squad_pairs(SQUAD_SUBSET)
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n")
    preset = _tiny_preset(tmp_path / "tiny", rows[1:])
    run = ["finetune", "embed", "--preset", str(preset), "--train", str(tmp_path / "pairs.tsv"),
           "--validation", str(tmp_path / "pairs.tsv"), "--output", str(tmp_path / "run"),
           "--batch-size", "8", "--epochs", "1", "--sequence-length", "64", "--no-export",
           "--lora-rank", "4", "--lora-targets", "attention", "--no-jit-compile"]  # fmt: skip
    assert main(run) == 0
    assert not any(
        "lora" in k for k in load_file(tmp_path / "run/preset/model.weights.safetensors")
    )
    merged = kbz.from_preset(str(tmp_path / "run" / "preset"), task="embedder")
    with_adapter = kbz.from_preset(str(preset), task="embedder")
    kbz.load_lora_weights(with_adapter, tmp_path / "run" / "adapter.safetensors")
    base = kbz.from_preset(str(preset), task="embedder")
    x = random_inputs(batch=3, length=12)
    np.testing.assert_allclose(_numpy(with_adapter(x)), _numpy(merged(x)), atol=1e-5)
    assert np.abs(_numpy(base(x)) - _numpy(merged(x))).max() > 1e-4  # the adapters trained
