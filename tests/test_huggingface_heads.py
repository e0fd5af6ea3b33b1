"""Fine-tuned heads to and from Hugging Face: transformers runs our exported task models.

Each task model is a tiny BERT whose every weight (heads included) is drawn at random, saved
as a preset, exported with `kbz convert --to huggingface`, and loaded with transformers'
`AutoModelFor...` (torch, CPU): its logits must equal ours within 1e-5 on the same ids
(`padding_mask` -> `attention_mask`, `segment_ids` -> `token_type_ids`), on real tokens
(ours mask padding positions of QA logits; transformers does not). The way back must be
bit-identical, head and task settings included.
"""

import json

import keras
import numpy as np
import pytest
from conftest import TINY, random_inputs
from safetensors.numpy import load_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main

ARCHITECTURE = {**TINY, "num_segments": 2, "dropout": 0.1, "gelu_approximate": False}
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"tok{i}" for i in range(995)]
TASKS = {
    "classifier": dict(num_classes=3, label_names=["negative", "neutral", "positive"]),
    "multi_label": dict(num_classes=4, multi_label=True, label_names=["a", "b", "c", "d"]),
    "regression": dict(num_classes=1),
    "tagger": dict(num_tags=5, label_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
    "question_answerer": {},
}
HF_CLASSES = {
    "classifier": "AutoModelForSequenceClassification",
    "multi_label": "AutoModelForSequenceClassification",
    "regression": "AutoModelForSequenceClassification",
    "tagger": "AutoModelForTokenClassification",
    "question_answerer": "AutoModelForQuestionAnswering",
}
PROBLEM_TYPES = {
    "classifier": "single_label_classification",
    "multi_label": "multi_label_classification",
    "regression": "regression",
}


def _task(kind: str) -> str:
    return "classifier" if kind in PROBLEM_TYPES else kind


def _random_task_model(kind: str, seed: int = 0, **task_kwargs):
    """A tiny task model with every weight random (LayerNorm scales around 1)."""
    keras.backend.clear_session()
    encoder = kbz.build_encoder(**ARCHITECTURE)
    model = kbz.tasks.build_task(_task(kind), encoder, **(task_kwargs or TASKS[kind]))
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        base = 1.0 if variable.path.endswith("/gamma") else 0.0
        variable.assign(base + rng.normal(0, 0.2, variable.shape).astype("float32"))
    return model


@pytest.fixture
def exported(request, tmp_path):
    kind = request.param
    model = _random_task_model(kind)
    preset = kbz.save_preset(model, tmp_path / "ours", vocabulary=VOCABULARY, lowercase=True)
    assert main(["convert", str(preset), str(tmp_path / "hf"), "--to", "huggingface"]) == 0
    return kind, model, preset, tmp_path / "hf"


def _ours(model, inputs):
    out = model(inputs)
    if isinstance(out, dict):
        return np.stack([np.asarray(out["start_logits"]), np.asarray(out["end_logits"])], -1)
    return np.asarray(out)


def _theirs(kind, directory, inputs):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = getattr(transformers, HF_CLASSES[kind]).from_pretrained(directory)
    model.eval()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
        )
    if kind == "question_answerer":
        return np.stack([out.start_logits.numpy(), out.end_logits.numpy()], -1), model.config
    return out.logits.numpy(), model.config


@pytest.mark.e2e
@pytest.mark.parametrize("exported", sorted(TASKS), indirect=True)
def test_transformers_computes_our_logits_from_the_exported_head(exported):
    kind, model, _, directory = exported
    inputs = random_inputs(batch=3, length=12, lengths=[12, 9, 5])
    ours = _ours(model, inputs)
    theirs, config = _theirs(kind, directory, inputs)
    assert theirs.shape == ours.shape
    if kind in ("tagger", "question_answerer"):  # per token: compare the real ones
        real = inputs["padding_mask"].astype(bool)
        ours, theirs = ours[real], theirs[real]
    np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0)
    assert np.abs(ours).max() > 0.1  # random heads: the logits are not trivially zero
    names = TASKS[kind].get("label_names")
    if names:
        assert [config.id2label[i] for i in range(len(names))] == names
        assert config.label2id == {name: i for i, name in enumerate(names)}
    if kind in PROBLEM_TYPES:
        assert config.problem_type == PROBLEM_TYPES[kind]
        assert config.num_labels == TASKS[kind]["num_classes"]
    architectures = json.loads((directory / "config.json").read_text())["architectures"]
    assert architectures == [HF_CLASSES[kind].replace("AutoModelFor", "BertFor")]


@pytest.mark.parametrize("exported", sorted(TASKS), indirect=True)
def test_ours_to_huggingface_to_ours_is_bit_identical_with_the_head(exported, tmp_path):
    kind, model, preset, directory = exported
    back = kbz.checkpoints.convert(directory, tmp_path / "back")
    first = load_file(str(preset / "model.weights.safetensors"))
    second = load_file(str(back / "model.weights.safetensors"))
    assert set(first) == set(second)
    assert ("pooled_dense/kernel" in first) == (_task(kind) == "classifier")  # as transformers
    for name in first:
        assert first[name].dtype == second[name].dtype
        assert first[name].tobytes() == second[name].tobytes(), name
    a, b = (json.loads((p / "preset.json").read_text()) for p in (preset, back))
    for key in ("architecture", "task", "task_config", "tokenizer", "num_parameters"):
        assert a[key] == b[key], key
    restored = kbz.from_preset(str(back), task=_task(kind))  # the head, with its settings
    inputs = random_inputs(batch=2, length=10)
    np.testing.assert_array_equal(_ours(restored, inputs), _ours(model, inputs))
    assert restored.task_config == model.task_config


def test_unnamed_labels_stay_unnamed_both_ways(tmp_path):
    model = _random_task_model("tagger", num_tags=3)
    preset = kbz.save_preset(model, tmp_path / "ours", vocabulary=VOCABULARY, lowercase=True)
    kbz.checkpoints.convert(preset, tmp_path / "hf", target_format="huggingface")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    back = kbz.checkpoints.convert(tmp_path / "hf", tmp_path / "back")
    assert kbz.presets.load_preset_config(str(back)).task_config["label_names"] is None


def test_head_of_another_structure_is_refused_before_writing(tmp_path):
    model = _random_task_model("classifier")
    preset = kbz.save_preset(model, tmp_path / "ours", vocabulary=VOCABULARY, lowercase=True)
    data = json.loads((preset / "preset.json").read_text())
    data["task_config"]["pooling"] = "mean"  # a head transformers has no class for
    (preset / "preset.json").write_text(json.dumps(data))
    kbz.presets.write_checksums(preset)
    with pytest.raises(ValueError, match=r"settings \['pooling'\].*BertForSequenceClassification"):
        kbz.checkpoints.export_huggingface(preset, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_task_checkpoint_without_its_architecture_is_refused(tmp_path):
    model = _random_task_model("question_answerer")
    preset = kbz.save_preset(model, tmp_path / "ours", vocabulary=VOCABULARY, lowercase=True)
    hf = kbz.checkpoints.export_huggingface(preset, tmp_path / "hf")
    config = json.loads((hf / "config.json").read_text())
    (hf / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    with pytest.raises(ValueError, match="holds a task head.*names no BERT task model"):
        kbz.checkpoints.convert(hf, tmp_path / "back")
    (hf / "config.json").write_text(
        json.dumps({**config, "architectures": ["BertForSequenceClassification"]})
    )
    with pytest.raises(ValueError, match="classifier.weight is missing"):
        kbz.checkpoints.convert(hf, tmp_path / "back")


def test_embedder_exports_sentence_transformers_pooling(tmp_path):
    keras.backend.clear_session()
    encoder = kbz.build_encoder(**ARCHITECTURE)
    model = kbz.build_embedder(encoder, pooling="cls", normalize=False)
    preset = kbz.save_preset(model, tmp_path / "ours", vocabulary=VOCABULARY, lowercase=True)
    hf = kbz.checkpoints.export_huggingface(preset, tmp_path / "hf")
    assert json.loads((hf / "config.json").read_text())["architectures"] == ["BertModel"]
    back = kbz.checkpoints.convert(hf, tmp_path / "back")
    config = kbz.presets.load_preset_config(str(back))
    assert config.embedder == {"pooling": "cls", "normalize": False}
    restored = kbz.from_preset(str(back), task="embedder")
    inputs = random_inputs(batch=2, length=10)
    np.testing.assert_array_equal(np.asarray(restored(inputs)), np.asarray(model(inputs)))


@pytest.mark.e2e
def test_converted_minilm_exports_its_sentence_transformers_pipeline(
    minilm_preset, minilm_dir, tmp_path
):
    hf = kbz.checkpoints.export_huggingface(minilm_preset, tmp_path / "hf")
    for name in ("modules.json", "1_Pooling/config.json"):  # as sentence-transformers wrote them
        assert json.loads((hf / name).read_text()) == json.loads((minilm_dir / name).read_text())
    original = load_file(str(minilm_dir / "model.safetensors"))
    exported = load_file(str(hf / "model.safetensors"))
    assert set(exported) == set(original) - {"embeddings.position_ids"}
    for name in exported:
        assert exported[name].tobytes() == original[name].tobytes(), name
