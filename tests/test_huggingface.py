"""Hugging Face conversion on the real MiniLM-L6 checkpoint: parity, CLI, bad checkpoints.

The reference outputs in tests/fixtures/minilm_hf_reference.npz were recorded with Hugging Face
transformers (torch) by tools/record_hf_reference.py; versions and inputs are in the .json
beside it.
"""

import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(FIXTURES / "minilm_hf_reference.npz", allow_pickle=False))


@pytest.fixture(scope="module")
def minilm(minilm_preset):
    return kbz.from_preset(str(minilm_preset))


def test_reference_provenance_is_recorded():
    provenance = json.loads((FIXTURES / "minilm_hf_reference.json").read_text())
    assert {"transformers", "torch", "checkpoint_sha256", "tolerance"} <= set(provenance)


def test_converted_preset_matches_huggingface_within_1e4(minilm, reference):
    inputs = {k: reference[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    out = minilm(inputs)
    real = reference["padding_mask"].astype(bool)
    sequence_error = np.abs(np.asarray(out["sequence_output"]) - reference["sequence_output"])
    assert sequence_error[real].max() < 1e-4
    assert np.abs(np.asarray(out["pooled_output"]) - reference["pooled_output"]).max() < 1e-4
    assert reference["segment_ids"].max() == 1  # the pair row exercises segment embeddings


def test_converted_preset_records_exact_gelu_and_lowercase(minilm_preset):
    config = kbz.presets.load_preset_config(str(minilm_preset))
    assert config.architecture["gelu_approximate"] is False  # HF "gelu" is the erf form
    assert config.lowercase is True
    assert config.architecture["num_layers"] == 6 and config.architecture["hidden_dim"] == 384


def _sentence_embeddings(encoder, inputs):
    """all-MiniLM-L6-v2's sentence vectors: mean over real tokens, then L2 normalisation."""
    sequence = np.asarray(encoder(inputs)["sequence_output"])
    mask = inputs["padding_mask"][..., None].astype(np.float32)
    mean = (sequence * mask).sum(1) / mask.sum(1)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def test_sentence_similarities_are_sensible(minilm, reference):
    inputs = {k: reference[k][:3] for k in ("token_ids", "segment_ids", "padding_mask")}
    vectors = _sentence_embeddings(minilm, inputs)
    paraphrase, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert paraphrase > 0.6 and unrelated < 0.2, (paraphrase, unrelated)


def _copy_checkpoint(minilm_dir, tmp_path):
    destination = tmp_path / "hf"
    shutil.copytree(minilm_dir, destination)
    return destination


def test_pickle_checkpoints_are_refused(minilm_dir, tmp_path):
    source = _copy_checkpoint(minilm_dir, tmp_path)
    (source / "model.safetensors").unlink()
    (source / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(ValueError, match="pickle files run code"):
        kbz.checkpoints.convert_huggingface(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_other_architectures_are_refused(minilm_dir, tmp_path):
    source = _copy_checkpoint(minilm_dir, tmp_path)
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(ValueError, match="model_type is 'roberta'"):
        kbz.checkpoints.convert_huggingface(source, tmp_path / "out")


def test_missing_and_foreign_variables_are_named(minilm_dir, tmp_path):
    source = _copy_checkpoint(minilm_dir, tmp_path)
    tensors = load_file(source / "model.safetensors")
    tensors["encoder.layer.0.attention.self.rotary.weight"] = np.zeros(3, np.float32)
    save_file(tensors, source / "model.safetensors")
    with pytest.raises(ValueError, match="rotary.*not BERT encoder variables"):
        kbz.checkpoints.convert_huggingface(source, tmp_path / "out")
    del tensors["encoder.layer.3.output.dense.bias"]
    save_file(tensors, source / "model.safetensors")
    with pytest.raises(ValueError, match="encoder.layer.3.output.dense.bias is missing"):
        kbz.checkpoints.convert_huggingface(source, tmp_path / "out")


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    (tmp_path / "src").mkdir()  # an empty folder (the destination must lie outside it)
    assert main(["convert", str(tmp_path / "src"), str(tmp_path / "out")]) == 2
    assert "has no config.json" in capsys.readouterr().err
