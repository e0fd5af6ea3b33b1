"""Checkpoint converters: Google TF1, Hugging Face (with heads), keras-hub, export to HF.

Parity targets are in tests/fixtures/pretraining_reference.npz, recorded with transformers'
`BertForPreTraining` by tools/record_pretraining_reference.py on the real MiniLM-L6 weights
plus seeded heads; the tests build the same checkpoints from the same generator (imported
from that tool by path, numpy only) and never need torch. The Google-format checkpoint is
written here with TensorFlow's TF1 saver under the original variable names.
"""

import importlib.util
import json
import logging
import shutil
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TINY_GOOGLE = dict(
    vocabulary_size=60,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=24,
    num_segments=2,
    dropout=0.1,
    gelu_approximate=True,
    attention_dropout=0.1,
)
_spec = importlib.util.spec_from_file_location(
    "record_pretraining_reference", ROOT / "tools" / "record_pretraining_reference.py"
)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)


# --- Google TF1 checkpoints, written with TensorFlow's TF1 saver ---------------------------


def write_google_checkpoint(
    directory: Path, variables: dict, architecture: dict, vocabulary: list
) -> Path:
    """bert_config.json + bert_model.ckpt.{index,data-*} + vocab.txt, as Google released them."""
    directory.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        tf_variables = [
            tf.compat.v1.Variable(value, name=name) for name, value in variables.items()
        ]
        saver = tf.compat.v1.train.Saver(tf_variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(directory / "bert_model.ckpt"), write_meta_graph=False)
    config = {
        "vocab_size": architecture["vocabulary_size"],
        "hidden_size": architecture["hidden_dim"],
        "num_hidden_layers": architecture["num_layers"],
        "num_attention_heads": architecture["num_heads"],
        "intermediate_size": architecture["intermediate_dim"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": architecture.get("dropout", 0.1),
        "attention_probs_dropout_prob": kbz.architecture.attention_dropout_rate(architecture),
        "max_position_embeddings": architecture["max_sequence_length"],
        "type_vocab_size": architecture["num_segments"],
        "initializer_range": 0.02,
    }
    (directory / "bert_config.json").write_text(json.dumps(config, indent=2))
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in vocabulary))
    return directory


def google_head_variables(heads: dict) -> dict:
    """Seeded heads under Google's names (`output_weights` is `[2, hidden]`)."""
    t = "cls/predictions/transform"
    return {
        f"{t}/dense/kernel": heads["transform_kernel"],
        f"{t}/dense/bias": heads["transform_bias"],
        f"{t}/LayerNorm/gamma": heads["transform_gamma"],
        f"{t}/LayerNorm/beta": heads["transform_beta"],
        "cls/predictions/output_bias": heads["output_bias"],
        "cls/seq_relationship/output_weights": np.ascontiguousarray(heads["nsp_kernel"].T),
        "cls/seq_relationship/output_bias": heads["nsp_bias"],
    }


def random_google_variables(architecture: dict, seed: int = 0) -> dict:
    """Random weights of every variable of Google's BERT (encoder, pooler, heads)."""
    rng = np.random.default_rng(seed)
    h, i, v = (
        architecture["hidden_dim"],
        architecture["intermediate_dim"],
        architecture["vocabulary_size"],
    )

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    out = {
        "bert/embeddings/word_embeddings": normal(v, h),
        "bert/embeddings/position_embeddings": normal(architecture["max_sequence_length"], h),
        "bert/embeddings/token_type_embeddings": normal(architecture["num_segments"], h),
        "bert/embeddings/LayerNorm/gamma": 1 + normal(h),
        "bert/embeddings/LayerNorm/beta": normal(h),
        "bert/pooler/dense/kernel": normal(h, h),
        "bert/pooler/dense/bias": normal(h),
    }
    for n in range(architecture["num_layers"]):
        layer = f"bert/encoder/layer_{n}"
        for name, shape in (
            ("attention/self/query", (h, h)),
            ("attention/self/key", (h, h)),
            ("attention/self/value", (h, h)),
            ("attention/output/dense", (h, h)),
            ("intermediate/dense", (h, i)),
            ("output/dense", (i, h)),
        ):
            out[f"{layer}/{name}/kernel"] = normal(*shape)
            out[f"{layer}/{name}/bias"] = normal(shape[1])
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            out[f"{layer}/{norm}/gamma"] = 1 + normal(h)
            out[f"{layer}/{norm}/beta"] = normal(h)
    out.update(google_head_variables(tool.seeded_head_weights(h, v)))
    return out


def _google_name(hf_name: str) -> str:
    """transformers' BertModel name -> Google's (written independently of the converter)."""
    name = hf_name.replace("encoder.layer.", "encoder/layer_")
    name = name.replace("LayerNorm.weight", "LayerNorm/gamma").replace(
        "LayerNorm.bias", "LayerNorm/beta"
    )
    if name.startswith("embeddings.") and "LayerNorm" not in name:
        name = name[: -len(".weight")]
    else:
        name = name.replace(".weight", ".kernel")
    return "bert/" + name.replace(".", "/")


@pytest.fixture(scope="module")
def tiny_vocabulary():
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(55)]


@pytest.fixture
def tiny_google(tmp_path, tiny_vocabulary):
    return write_google_checkpoint(
        tmp_path / "google", random_google_variables(TINY_GOOGLE), TINY_GOOGLE, tiny_vocabulary
    )


# --- parity with transformers' BertForPreTraining on MiniLM + seeded heads -----------------


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(FIXTURES / "pretraining_reference.npz", allow_pickle=False))


@pytest.fixture(scope="module")
def hf_pretraining_dir(minilm_dir, tmp_path_factory):
    directory = tmp_path_factory.mktemp("hf") / "bert_for_pretraining"
    tool.write_huggingface_pretraining_checkpoint(Path(minilm_dir), directory, "gelu")
    return directory


@pytest.fixture(scope="module")
def google_minilm_dir(minilm_dir, tmp_path_factory):
    tensors = load_file(str(Path(minilm_dir) / "model.safetensors"))
    variables = {}
    for name, value in tensors.items():
        if name.endswith("position_ids"):
            continue
        google = _google_name(name)
        variables[google] = np.ascontiguousarray(value.T) if google.endswith("/kernel") else value
    config = json.loads((Path(minilm_dir) / "config.json").read_text())
    variables.update(
        google_head_variables(tool.seeded_head_weights(config["hidden_size"], config["vocab_size"]))
    )
    slot = "bert/encoder/layer_0/output/dense/kernel"
    variables[f"{slot}/adam_m"] = np.zeros_like(variables[slot])  # optimizer slots: skipped
    variables[f"{slot}/adam_v"] = np.ones_like(variables[slot])
    variables["global_step"] = np.int64(1000)
    architecture = dict(
        vocabulary_size=config["vocab_size"],
        num_layers=6,
        num_heads=12,
        hidden_dim=384,
        intermediate_dim=1536,
        max_sequence_length=512,
        num_segments=2,
    )
    vocabulary = (Path(minilm_dir) / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return write_google_checkpoint(
        tmp_path_factory.mktemp("google") / "minilm_google", variables, architecture, vocabulary
    )


def parity_errors(preset, reference, prefix) -> dict:
    """Max abs differences of our pretrainer / encoder from the recorded transformers run."""
    keras.backend.clear_session()
    pretrainer = kbz.from_preset(str(preset), task="pretrainer", max_predictions=3)
    inputs = {k: reference[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    out = {
        k: np.asarray(v)
        for k, v in pretrainer({**inputs, "mask_positions": reference["mask_positions"]}).items()
    }
    keras.backend.clear_session()
    sequence = np.asarray(kbz.from_preset(str(preset))(inputs)["sequence_output"])
    real = reference["padding_mask"].astype(bool)
    mlm = out["mlm_logits"]
    return {
        "argmax_mismatches": int(
            (mlm.argmax(-1) != reference[f"{prefix}_mlm_logits_argmax"]).sum()
        ),
        "sequence_output": np.abs(sequence - reference[f"{prefix}_sequence_output"])[real].max(),
        "mlm_logits": max(
            np.abs(mlm[..., ::16] - reference[f"{prefix}_mlm_logits_slice"]).max(),
            np.abs(mlm.max(-1) - reference[f"{prefix}_mlm_logits_max"]).max(),
        ),
        "mlm_logsumexp": np.abs(
            np.log(np.exp(mlm - mlm.max(-1, keepdims=True)).sum(-1))
            + mlm.max(-1)
            - reference[f"{prefix}_mlm_logsumexp"]
        ).max(),
        "nsp_logits": np.abs(out["nsp_logits"] - reference[f"{prefix}_nsp_logits"]).max(),
    }


def _assert_parity(preset, reference, prefix):
    errors = parity_errors(preset, reference, prefix)
    assert errors["argmax_mismatches"] == 0 and errors["sequence_output"] < 1e-4, errors
    assert max(errors["mlm_logits"], errors["mlm_logsumexp"], errors["nsp_logits"]) < 5e-4, errors


def test_seeded_heads_are_the_recorded_ones():
    provenance = json.loads((FIXTURES / "pretraining_reference.json").read_text())
    assert tool.heads_sha256(tool.seeded_head_weights(384, 30522)) == provenance["heads_sha256"]
    assert {"transformers", "torch", "tolerance", "checkpoint_sha256"} <= set(provenance)


@pytest.mark.e2e
def test_huggingface_pretraining_checkpoint_matches_transformers(
    hf_pretraining_dir, reference, tmp_path
):
    preset = kbz.checkpoints.convert_huggingface(hf_pretraining_dir, tmp_path / "hf_preset")
    config = kbz.presets.load_preset_config(str(preset))
    assert config.task == "pretrainer" and config.task_config == {"max_predictions": 20}
    assert config.architecture["gelu_approximate"] is False
    _assert_parity(preset, reference, "exact_gelu")


@pytest.mark.e2e
def test_google_checkpoint_matches_transformers_with_tanh_gelu(
    google_minilm_dir, reference, tmp_path, capsys
):
    assert main(["convert", str(google_minilm_dir), str(tmp_path / "g")]) == 0  # auto: google
    config = kbz.presets.load_preset_config(str(tmp_path / "g"))
    assert config.architecture["gelu_approximate"] is True  # Google's "gelu" is the tanh form
    assert config.task == "pretrainer" and config.lowercase is True
    _assert_parity(tmp_path / "g", reference, "tanh_gelu")
    # ...and the GELU form is what makes the difference: the erf reference is far off.
    assert parity_errors(tmp_path / "g", reference, "exact_gelu")["sequence_output"] > 1e-3


# --- Google format: bad input -----------------------------------------------------------


def test_google_zip_converts_and_skips_optimizer_slots(tmp_path, tiny_vocabulary):
    variables = random_google_variables(TINY_GOOGLE)
    variables["bert/pooler/dense/kernel/adam_m"] = np.zeros((16, 16), np.float32)
    variables["global_step"] = np.int64(3)
    folder = write_google_checkpoint(tmp_path / "tiny", variables, TINY_GOOGLE, tiny_vocabulary)
    assert tf.train.load_checkpoint(str(folder / "bert_model.ckpt")).has_tensor("global_step")
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.iterdir()):
            bundle.write(path, f"tiny/{path.name}")
    preset = kbz.checkpoints.convert(archive, tmp_path / "preset")
    weights = load_file(str(preset / "model.weights.safetensors"))
    np.testing.assert_array_equal(
        weights["nsp_head/kernel"], variables["cls/seq_relationship/output_weights"].T
    )
    q, k, v = (
        variables[f"bert/encoder/layer_1/attention/self/{p}/kernel"]
        for p in ("query", "key", "value")
    )
    np.testing.assert_array_equal(
        weights["transformer_layer_1/attention_qkv/kernel"], np.concatenate([q, k, v], axis=1)
    )


def test_albert_or_roberta_names_are_another_architecture(tmp_path, tiny_vocabulary):
    variables = random_google_variables(TINY_GOOGLE)
    variables["bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"] = (
        np.zeros((16, 32), np.float32)
    )
    directory = write_google_checkpoint(
        tmp_path / "albert", variables, TINY_GOOGLE, tiny_vocabulary
    )
    with pytest.raises(
        ValueError,
        match=r"bert_model.ckpt.index: variables \['bert/encoder/"
        r"transformer/group_0.*another architecture",
    ):
        kbz.checkpoints.convert_google(directory, tmp_path / "out")
    config = json.loads((directory / "bert_config.json").read_text())
    (directory / "bert_config.json").write_text(json.dumps({**config, "embedding_size": 8}))
    with pytest.raises(
        ValueError,
        match=r"bert_config.json: keys \['embedding_size'\] belong "
        "to another architecture \\(ALBERT\\)",
    ):
        kbz.checkpoints.convert_google(directory, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_google_variable_is_named(tmp_path, tiny_vocabulary):
    variables = random_google_variables(TINY_GOOGLE)
    del variables["bert/encoder/layer_1/output/LayerNorm/beta"]
    directory = write_google_checkpoint(tmp_path / "g", variables, TINY_GOOGLE, tiny_vocabulary)
    with pytest.raises(
        ValueError,
        match="bert_model.ckpt.index: variable bert/encoder/layer_1/"
        "output/LayerNorm/beta is missing",
    ):
        kbz.checkpoints.convert_google(directory, tmp_path / "out")


def test_truncated_google_checkpoint_names_file_and_variable(tiny_google, tmp_path):
    data = next(tiny_google.glob("bert_model.ckpt.data-*"))
    data.write_bytes(data.read_bytes()[:2000])
    with pytest.raises(
        ValueError,
        match=r"Cannot read variable \S+ from \S+data-00000-of-00001"
        ".*truncated",
    ):
        kbz.checkpoints.convert_google(tiny_google, tmp_path / "out")


def test_vocabulary_size_mismatch_names_file_and_variable(tiny_google, tmp_path):
    lines = (tiny_google / "vocab.txt").read_text().splitlines()
    (tiny_google / "vocab.txt").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(
        ValueError,
        match=r"vocab.txt has 59 tokens but variable "
        r"bert/embeddings/word_embeddings in \S+ has 60 rows",
    ):
        kbz.checkpoints.convert_google(tiny_google, tmp_path / "out")


def test_config_that_does_not_fit_the_checkpoint_names_variable(tiny_google, tmp_path):
    config = json.loads((tiny_google / "bert_config.json").read_text())
    (tiny_google / "bert_config.json").write_text(json.dumps({**config, "intermediate_size": 48}))
    with pytest.raises(
        ValueError,
        match="intermediate/dense/kernel has shape \\(16, 32\\), but "
        "the architecture in .*bert_config.json needs",
    ):
        kbz.checkpoints.convert_google(tiny_google, tmp_path / "out")


def test_google_checkpoint_without_heads_is_an_encoder(tmp_path, tiny_vocabulary, caplog):
    variables = {
        k: v for k, v in random_google_variables(TINY_GOOGLE).items() if not k.startswith("cls/")
    }
    directory = write_google_checkpoint(tmp_path / "g", variables, TINY_GOOGLE, tiny_vocabulary)
    with caplog.at_level(logging.WARNING):
        preset = kbz.checkpoints.convert_google(directory, tmp_path / "out")
    assert "no pretraining heads" in caplog.text
    assert kbz.presets.load_preset_config(str(preset)).task == "encoder"


# --- Hugging Face format: heads, pickle, truncation --------------------------------------


@pytest.mark.e2e
def test_bert_model_gives_encoder_and_masked_lm_gives_new_nsp(hf_pretraining_dir, tmp_path, caplog):
    tensors = load_file(str(hf_pretraining_dir / "model.safetensors"))
    masked_lm = tmp_path / "masked_lm"
    shutil.copytree(hf_pretraining_dir, masked_lm)
    save_file(
        {k: v for k, v in tensors.items() if not k.startswith(("cls.seq", "bert.pooler"))},
        str(masked_lm / "model.safetensors"),
    )
    with caplog.at_level(logging.WARNING):
        preset = kbz.checkpoints.convert(masked_lm, tmp_path / "mlm_preset")
    assert "nsp_head/kernel" in caplog.text and "pooled_dense/kernel" in caplog.text
    assert kbz.presets.load_preset_config(str(preset)).task == "pretrainer"
    weights = load_file(str(preset / "model.weights.safetensors"))
    np.testing.assert_array_equal(weights["mlm_output_bias/bias"], tensors["cls.predictions.bias"])
    # the encoder was built without random draws: the pooler the file lacks is drawn afterwards
    pooler = weights["pooled_dense/kernel"]
    assert 0.015 < pooler.std() < 0.02 and np.abs(pooler).max() <= 0.04
    bert_model = tmp_path / "bert_model"
    shutil.copytree(hf_pretraining_dir, bert_model)
    save_file(
        {k: v for k, v in tensors.items() if not k.startswith("cls.")},
        str(bert_model / "model.safetensors"),
    )
    caplog.clear()
    # most checkpoints are a BertModel: that is no warning, only said with --verbose
    with caplog.at_level(logging.INFO):
        preset = kbz.checkpoints.convert(bert_model, tmp_path / "encoder_preset")
    assert "no pretraining heads" in caplog.text and "new MLM/NSP heads" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert kbz.presets.load_preset_config(str(preset)).task == "encoder"


def test_pickle_needs_the_explicit_unsafe_flag(hf_pretraining_dir, tmp_path, capsys):
    source = tmp_path / "pickled"
    shutil.copytree(hf_pretraining_dir, source)
    (source / "model.safetensors").unlink()
    (source / "pytorch_model.bin").write_bytes(b"not really pickle")
    assert main(["convert", str(source), str(tmp_path / "out")]) == 2
    assert "--allow-pickle" in capsys.readouterr().err
    try:
        import torch  # noqa: F401
    except ImportError:
        assert main(["convert", str(source), str(tmp_path / "out"), "--allow-pickle"]) == 2
        assert "needs PyTorch" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_truncated_safetensors_names_the_file(hf_pretraining_dir, tmp_path):
    source = tmp_path / "truncated"
    shutil.copytree(hf_pretraining_dir, source)
    weights = source / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])
    with pytest.raises(
        ValueError,
        match=r"Cannot read weights file \S+model.safetensors.*"
        "truncated",
    ):
        kbz.checkpoints.convert(source, tmp_path / "out", source_format="huggingface")


def test_untied_decoder_is_refused(hf_pretraining_dir, tmp_path):
    source = tmp_path / "untied"
    shutil.copytree(hf_pretraining_dir, source)
    tensors = load_file(str(source / "model.safetensors"))
    tensors["cls.predictions.decoder.weight"] = (
        tensors["bert.embeddings.word_embeddings.weight"] + 1
    )
    save_file(tensors, str(source / "model.safetensors"))
    with pytest.raises(ValueError, match="decoder.weight differs from embeddings"):
        kbz.checkpoints.convert(source, tmp_path / "out")


# --- back out to Hugging Face, and the round trip ----------------------------------------


@pytest.mark.e2e
def test_ours_to_huggingface_to_ours_is_bit_identical(hf_pretraining_dir, tmp_path):
    ours = kbz.checkpoints.convert_huggingface(hf_pretraining_dir, tmp_path / "ours")
    assert main(["convert", str(ours), str(tmp_path / "hf"), "--to", "huggingface"]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["hidden_act"] == "gelu"
    assert json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())["do_lower_case"]
    exported = load_file(str(tmp_path / "hf" / "model.safetensors"))
    original = load_file(str(hf_pretraining_dir / "model.safetensors"))
    assert set(exported) == set(original) - {"bert.embeddings.position_ids"}
    for name in exported:
        np.testing.assert_array_equal(exported[name], original[name], err_msg=name)
    back = kbz.checkpoints.convert(tmp_path / "hf", tmp_path / "back")
    first = load_file(str(ours / "model.weights.safetensors"))
    second = load_file(str(back / "model.weights.safetensors"))
    assert set(first) == set(second)
    for name in first:
        assert first[name].dtype == second[name].dtype
        assert first[name].tobytes() == second[name].tobytes(), name
    a, b = (json.loads((p / "preset.json").read_text()) for p in (ours, back))
    for key in ("architecture", "task", "task_config", "tokenizer", "num_parameters"):
        assert a[key] == b[key]


def test_encoder_exports_as_bert_model_with_tanh_gelu(tiny_google, tmp_path):
    preset = kbz.checkpoints.convert_google(tiny_google, tmp_path / "enc", heads=False)
    assert main(["convert", str(preset), str(tmp_path / "hf"), "--to", "huggingface"]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertModel"] and config["hidden_act"] == "gelu_new"
    assert not any(
        k.startswith(("cls.", "bert."))
        for k in load_file(str(tmp_path / "hf" / "model.safetensors"))
    )
    back = kbz.checkpoints.convert(tmp_path / "hf", tmp_path / "back")
    assert kbz.presets.load_preset_config(str(back)).architecture == TINY_GOOGLE
    assert (
        main(["convert", str(tmp_path / "hf"), str(tmp_path / "hf2"), "--to", "huggingface"]) == 0
    )  # any source converts straight to Hugging Face


def test_attention_dropout_converts_both_ways(tmp_path, tiny_vocabulary):
    """Google's and Hugging Face's `attention_probs_dropout_prob` is our `attention_dropout`."""
    architecture = {**TINY_GOOGLE, "attention_dropout": 0.0}
    google = write_google_checkpoint(
        tmp_path / "g", random_google_variables(architecture), architecture, tiny_vocabulary
    )
    preset = kbz.checkpoints.convert_google(google, tmp_path / "ours")
    assert kbz.presets.load_preset_config(str(preset)).architecture == architecture
    block = kbz.from_preset(str(preset)).get_layer("transformer_layer_0")
    assert (block.dropout, block.attention_dropout_rate) == (0.1, 0.0)
    assert main(["convert", str(preset), str(tmp_path / "hf"), "--to", "huggingface"]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["hidden_dropout_prob"], config["attention_probs_dropout_prob"]) == (0.1, 0.0)
    back = kbz.checkpoints.convert(tmp_path / "hf", tmp_path / "back")
    assert kbz.presets.load_preset_config(str(back)).architecture == architecture


# --- keras-hub presets -------------------------------------------------------------------


@pytest.fixture
def keras_hub_preset(tmp_path, tiny_vocabulary):
    import keras_hub  # a dependency of the package: never skipped

    keras.utils.set_random_seed(3)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=60,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=24,
    )
    for variable in backbone.weights:  # non-trivial LayerNorm and biases too
        variable.assign(
            np.random.default_rng(len(variable.path)).normal(
                1.0 if variable.path.endswith("gamma") else 0.0, 0.2, variable.shape
            )
        )
    directory = tmp_path / "keras_hub_bert"
    backbone.save_to_preset(str(directory))
    keras_hub.models.BertTokenizer(vocabulary=tiny_vocabulary, lowercase=True).save_to_preset(
        str(directory)
    )
    return backbone, directory


def test_keras_hub_preset_matches_keras_hub_outputs(keras_hub_preset, tmp_path):
    from conftest import random_inputs

    backbone, directory = keras_hub_preset
    assert main(["convert", str(directory), str(tmp_path / "ours")]) == 0  # auto: keras_hub
    config = kbz.presets.load_preset_config(str(tmp_path / "ours"))
    assert config.architecture["gelu_approximate"] is True and config.lowercase is True
    encoder = kbz.from_preset(str(tmp_path / "ours"))
    inputs = random_inputs(batch=3, length=12, vocabulary_size=60, seed=4)
    ours, theirs = encoder(inputs), backbone(inputs)
    for key in ("sequence_output", "pooled_output"):
        assert np.abs(np.asarray(ours[key]) - np.asarray(theirs[key])).max() < 1e-5, key


def test_keras_hub_other_backbones_and_missing_vocabulary(
    keras_hub_preset, tmp_path, tiny_vocabulary
):
    _, directory = keras_hub_preset
    shutil.rmtree(directory / "assets")
    with pytest.raises(ValueError, match="has no tokenizer vocabulary.*--vocab-file"):
        kbz.checkpoints.convert(directory, tmp_path / "out")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in tiny_vocabulary))
    assert main(["convert", str(directory), str(tmp_path / "out"), "--vocab-file", str(vocab)]) == 0
    config = json.loads((directory / "config.json").read_text())
    config["registered_name"] = "keras_hub>RobertaBackbone"
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="RobertaBackbone.*another architecture"):
        kbz.checkpoints.convert(directory, tmp_path / "out2", vocab_file=vocab)


def test_format_detection_and_wrong_format(tiny_google, tmp_path, capsys):
    assert kbz.checkpoints.detect_format(tiny_google) == "google"
    assert main(["convert", str(tiny_google), str(tmp_path / "o"), "--from", "huggingface"]) == 2
    assert "has no config.json" in capsys.readouterr().err
    assert main(["convert", str(tiny_google), str(tmp_path / "o"), "--from", "keras_hub"]) == 2
    assert "keras-hub preset directory" in capsys.readouterr().err
