"""Presets: names, parameter counts, preset directories, checksums, bad input."""

import inspect
import json
import re
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import random_inputs

import keras_bert_zoo as kbz
from keras_bert_zoo.architecture import REQUIRED as ARCHITECTURE_REQUIRED
from keras_bert_zoo.presets import load_preset_config
from keras_bert_zoo.saving import checksums
from keras_bert_zoo.saving import preset as preset_format

# The reference counts (encoder with pooler), equal to the original BERT releases.
EXPECTED_PARAMETERS = {
    "bert_tiny_en_uncased": 4_385_920,
    "bert_mini_en_uncased": 11_170_560,
    "bert_small_en_uncased": 28_763_648,
    "bert_medium_en_uncased": 41_373_184,
    "bert_base_en_uncased": 109_482_240,
    "bert_base_en": 108_310_272,
    "bert_large_en_uncased": 335_141_888,
    "bert_large_en": 333_579_264,
    # vocabulary 119,547 and 21,128 rows on the BERT-Base shape
    "bert_base_multi": 177_853_440,
    "bert_base_zh": 102_267_648,
    "all_minilm_l6_v2": 22_713_216,  # the real checkpoint builds it (test_minilm_preset.py)
}
LOWERCASE = {"bert_base_en": False, "bert_large_en": False, "bert_base_multi": False}


def test_list_presets_sorted_and_complete():
    names = kbz.list_presets()
    assert names == sorted(names)
    assert set(EXPECTED_PARAMETERS) <= set(names)


def _built(name):
    # BERT-Base shapes and up take 20-60 s each to initialize on 2 cores: end-to-end tier
    # (keras-hub's large / extra_large); every preset's count is checked analytically below.
    large = EXPECTED_PARAMETERS[name] > 50_000_000
    return pytest.param(name, marks=pytest.mark.e2e) if large else name


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_every_preset_has_its_exact_parameter_count(name):
    config = load_preset_config(name)
    assert kbz.architecture.parameter_count(config.architecture) == EXPECTED_PARAMETERS[name]


@pytest.mark.parametrize("name", [_built(name) for name in sorted(EXPECTED_PARAMETERS)])
def test_every_preset_builds_with_exact_parameter_count(name):
    keras.backend.clear_session()
    encoder = kbz.from_preset(name, load_weights=False)
    assert encoder.count_params() == EXPECTED_PARAMETERS[name]
    assert (
        kbz.architecture.parameter_count(load_preset_config(name).architecture)
        == EXPECTED_PARAMETERS[name]
    )
    config = load_preset_config(name)
    assert config.lowercase == LOWERCASE.get(name, True)
    with open(config.vocabulary_path, encoding="utf-8") as handle:
        vocabulary = handle.read().split("\n")[:-1]  # not splitlines: tokens hold U+2028 etc.
    assert len(vocabulary) == config.architecture["vocabulary_size"]
    assert vocabulary[0] == "[PAD]" and vocabulary[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    keras.backend.clear_session()


def test_unknown_preset_lists_close_matches():
    with pytest.raises(
        ValueError,
        match=r"Unknown preset 'bert_base_uncased'.*Did you mean"
        r".*'bert_base_en_uncased'",
    ):
        kbz.from_preset("bert_base_uncased", load_weights=False)


def test_named_preset_without_weights_says_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("KBZ_CACHE_DIR", str(tmp_path / "cache"))
    # unpinned presets now download by default: an empty mirror folder keeps this offline
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", str(tmp_path / "empty_mirror"))
    monkeypatch.delenv("KBZ_REQUIRE_PINNED", raising=False)
    with pytest.raises(
        ValueError, match="not available on this machine.*load_weights=False.*kbz convert"
    ):
        kbz.from_preset("bert_tiny_en_uncased")


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="No preset directory"):
        kbz.from_preset(str(tmp_path / "nope"))


@pytest.fixture
def saved_tiny(tiny_architecture, tmp_path):
    keras.utils.set_random_seed(2)
    encoder = kbz.build_encoder(**tiny_architecture)
    vocabulary = ["[PAD]"] + [f"tok{i}" for i in range(1, 1000)]
    directory = kbz.save_preset(encoder, tmp_path / "tiny", vocabulary=vocabulary, lowercase=True)
    return encoder, directory


def test_save_preset_round_trip(saved_tiny):
    encoder, directory = saved_tiny
    assert sorted(p.name for p in directory.iterdir()) == [
        ".kbz-files.json",  # what overwrite=True may replace (saving.ownership)
        "SHA256SUMS",
        "model.weights.safetensors",
        "preset.json",
        "vocab.txt",
    ]
    restored = kbz.from_preset(str(directory))
    inputs = random_inputs()
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(encoder(inputs)[key], restored(inputs)[key])
    # a preset loaded from a directory can be saved again without naming its vocabulary
    again = kbz.save_preset(restored, directory.parent / "again")
    assert (again / "vocab.txt").read_bytes() == (directory / "vocab.txt").read_bytes()


def test_from_preset_of_a_fine_tuned_preset_gives_its_task_model(saved_tiny, tmp_path):
    """The LoRA flow of docs/python-api.md, `save_preset(merge_lora(model))` then
    `from_preset(dir)`, gives the classifier back, not its bare encoder; `task="encoder"` asks
    for that (issue 30, 4)."""
    _, directory = saved_tiny
    model = kbz.from_preset(
        str(directory), task="classifier", num_classes=2, label_names=["n", "p"]
    )
    kbz.enable_lora(model, rank=2)
    merged = kbz.merge_lora(model)
    head = merged.get_layer("classifier_head")
    head.set_weights([w + 0.5 for w in head.get_weights()])  # a head the preset must carry
    finetuned = kbz.save_preset(merged, tmp_path / "my_finetuned")
    restored = kbz.from_preset(str(finetuned))
    assert restored.task == "classifier" and restored.task_config["label_names"] == ["n", "p"]
    inputs = random_inputs()
    np.testing.assert_array_equal(restored(inputs), merged(inputs))
    encoder = kbz.from_preset(str(finetuned), task="encoder")
    assert encoder.task == "encoder" and set(encoder(inputs)) == {
        "sequence_output",
        "pooled_output",
    }
    assert kbz.from_preset(str(directory)).task == "encoder"  # an encoder preset: as before


def drawn_shapes(monkeypatch) -> list:
    """The shape of every draw BERT's initializer (a `TruncatedNormal`) makes from now on."""
    shapes, draw = [], keras.initializers.TruncatedNormal.__call__

    def recording(self, shape, dtype=None):
        shapes.append(tuple(shape))
        return draw(self, shape, dtype)

    monkeypatch.setattr(keras.initializers.TruncatedNormal, "__call__", recording)
    return shapes


def test_loading_a_preset_draws_no_random_weights_the_file_replaces(saved_tiny, monkeypatch):
    """Under JAX each new shape's draw compiles a program (2.4-2.9 s of a MiniLM load): the
    encoder of a preset with weights starts from zeros, then takes the file's values."""
    encoder, directory = saved_tiny
    shapes = drawn_shapes(monkeypatch)
    restored = kbz.from_preset(str(directory), task="classifier", num_classes=2)
    assert shapes == []  # the classifier's new head draws from its own `RandomNormal`
    kept = {v.path: v for v in restored.weights}
    for variable in encoder.weights:  # the graph's variables hold the file's values
        if variable.path in kept:
            np.testing.assert_array_equal(kept[variable.path].numpy(), variable.numpy())
    fresh = kbz.from_preset(str(directory), load_weights=False)
    assert len(shapes) == sum(len(v.shape) == 2 for v in fresh.weights)  # each matrix drawn


def test_load_model_draws_no_random_weights(saved_tiny, tmp_path, monkeypatch):
    encoder, _ = saved_tiny
    classifier = kbz.build_classifier(encoder, num_classes=2)
    classifier.save(tmp_path / "classifier.keras")
    shapes = drawn_shapes(monkeypatch)
    restored = kbz.load_model(tmp_path / "classifier.keras")
    assert shapes == []
    inputs = random_inputs()
    np.testing.assert_array_equal(restored(inputs), classifier(inputs))


@pytest.mark.parametrize("task", ["encoder", "classifier"])
def test_a_pooler_the_preset_lacks_is_drawn_not_left_at_zero(saved_tiny, tmp_path, task):
    """A tagger's preset holds no pooler: an encoder or classifier from it draws one (BERT's
    truncated normal) instead of keeping the zeros it was built with."""
    encoder, _ = saved_tiny
    vocabulary = ["[PAD]"] + [f"tok{i}" for i in range(1, 1000)]
    tagger = kbz.build_tagger(encoder, num_tags=3)
    directory = kbz.save_preset(tagger, tmp_path / "tagger", vocabulary=vocabulary, lowercase=True)
    kwargs = {"num_classes": 2} if task == "classifier" else {}
    model = kbz.from_preset(str(directory), task=task, **kwargs)
    pooler = model.get_layer("pooled_dense")
    kernel, bias = pooler.kernel.numpy(), pooler.bias.numpy()
    assert 0.015 < kernel.std() < 0.02 and np.abs(kernel).max() <= 0.04  # truncated at 2 sd
    assert not bias.any()
    inputs = random_inputs()
    pooled = kbz.from_preset(str(directory), task="encoder")(inputs)["pooled_output"]
    assert np.abs(keras.ops.convert_to_numpy(pooled)).max() > 0.01  # not tanh(0)


def test_save_preset_refuses_to_overwrite(saved_tiny, tmp_path):
    encoder, directory = saved_tiny
    with pytest.raises(ValueError, match="already holds a preset.*pass overwrite=True"):
        kbz.save_preset(encoder, directory)
    (tmp_path / "mine").mkdir()  # overwrite=True never deletes a file kbz did not write
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds files kbz did not write \(notes.txt\)"):
        kbz.save_preset(encoder, tmp_path / "mine", overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def _rewrite_preset(directory, **changes):
    data = json.loads((directory / "preset.json").read_text())
    data.update(changes)
    (directory / "preset.json").write_text(json.dumps(data))
    kbz.presets.write_checksums(directory)


def test_tampered_file_fails_checksum_before_parsing(saved_tiny):
    _, directory = saved_tiny
    (directory / "preset.json").write_text("{ not even json")
    with pytest.raises(ValueError, match="Checksum mismatch.*preset.json"):
        kbz.from_preset(str(directory))


def test_weights_are_hashed_once_when_read_not_on_every_config_read(saved_tiny, monkeypatch):
    _, directory = saved_tiny
    hashed = []
    real = checksums.sha256_file
    for module in (checksums, preset_format):
        monkeypatch.setattr(
            module, "sha256_file", lambda path: hashed.append(Path(path).name) or real(path)
        )
    for _ in range(3):
        kbz.presets.load_preset_config(directory)
    assert "model.weights.safetensors" not in hashed  # config reads: preset.json and vocab
    hashed.clear()
    kbz.from_preset(directory)
    assert hashed.count("model.weights.safetensors") == 1


def test_tampered_weights_fail_their_checksum_when_loaded(saved_tiny):
    _, directory = saved_tiny
    weights = directory / "model.weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    kbz.presets.load_preset_config(directory)  # the config alone is intact
    with pytest.raises(ValueError, match="Checksum mismatch for .*model.weights.safetensors"):
        kbz.from_preset(directory)


def test_architecture_arguments_are_build_encoders_signature():
    parameters = inspect.signature(kbz.build_encoder).parameters
    expected = {
        name: (ARCHITECTURE_REQUIRED if p.default is inspect.Parameter.empty else p.default)
        for name, p in parameters.items()
        if name not in ("dtype", "name")
    }
    assert kbz.architecture.ARGUMENTS == expected


def test_missing_checksums_file_is_refused(saved_tiny):
    _, directory = saved_tiny
    (directory / "SHA256SUMS").unlink()
    with pytest.raises(ValueError, match="has no SHA256SUMS"):
        kbz.from_preset(str(directory))


@pytest.mark.parametrize("relative", ["../outside.txt", "/etc/passwd", "sub/../../x.txt"])
def test_paths_that_escape_the_directory_are_refused(saved_tiny, relative):
    _, directory = saved_tiny
    _rewrite_preset(directory, tokenizer={"vocabulary": relative, "lowercase": True})
    with pytest.raises(ValueError, match="outside the preset directory|relative path inside"):
        kbz.from_preset(str(directory))


def test_weights_that_do_not_fit_are_a_clear_error(saved_tiny):
    _, directory = saved_tiny
    data = json.loads((directory / "preset.json").read_text())
    data["architecture"]["intermediate_dim"] = 128
    data["num_parameters"] = None
    _rewrite_preset(directory, **data)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "do not fit this architecture (shape mismatch: transformer_layer_0/intermediate"
        ),
    ):
        kbz.from_preset(str(directory))


def test_truncated_weights_file_is_a_clear_error(saved_tiny):
    _, directory = saved_tiny
    weights = directory / "model.weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    kbz.presets.write_checksums(directory)
    with pytest.raises(ValueError, match="Cannot read weights file.*truncated"):
        kbz.from_preset(str(directory))


def test_vocabulary_size_must_match_architecture(saved_tiny):
    _, directory = saved_tiny
    (directory / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    kbz.presets.write_checksums(directory)
    with pytest.raises(
        ValueError, match="has 2 tokens but the architecture's vocabulary_size is 1000"
    ):
        kbz.from_preset(str(directory))


def test_unknown_architecture_keys_are_refused(saved_tiny):
    _, directory = saved_tiny
    data = json.loads((directory / "preset.json").read_text())
    data["architecture"]["class_name"] = "os.system"
    _rewrite_preset(directory, **data)
    with pytest.raises(ValueError, match=r"Unknown: \['class_name'\]"):
        kbz.from_preset(str(directory))
