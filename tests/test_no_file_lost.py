"""No user file is lost (issue 49): every command that writes runs against a folder seeded
with files kbz did not write, at depth 1 and 2, and with an output that is, holds or lies
inside an input; each is refused (exit 2) before any work and no byte below changes."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import UNCASED_VOCABULARY, save_tiny_classifier, save_tiny_preset

from keras_bert_zoo.cli import main
from keras_bert_zoo.saving.atomic import staged_directory

DATA = Path(__file__).parent / "data"
SST2 = DATA / "finetune" / "sst2_train_head.tsv"
CONLL = DATA / "finetune" / "wnut17_train_head.conll"
SQUAD = DATA / "finetune" / "squad_v1.1_sample.json"
RERANK = Path(__file__).parent / "fixtures" / "rerank" / "dev.tsv"
TEXT = DATA / "pretraining" / "sentences.txt"
FOREIGN = {"mine.txt": "depth 1", "notes/mine.txt": "depth 2"}


def _hashes(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _seed(directory: Path, files: dict) -> Path:
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """(an encoder preset, a fine-tuned classifier's preset), random weights."""
    root = tmp_path_factory.mktemp("presets")
    return save_tiny_preset(root / "tiny"), save_tiny_classifier(root / "classifier")


def _completed_run(output: Path, command: str) -> None:
    """A run directory as a complete run leaves it, and the user's files in it."""
    files = ["run.json", "metrics.json", "logs/train/events.out.tfevents.1.host.1.v2"]
    _seed(output, {name: "{}" for name in files[1:]})
    record = {"command": command, "settings": {}, "inputs": {}, "status": "complete"}
    (output / "run.json").write_text(json.dumps({**record, "metrics": {}, "files": files}))
    _seed(output, {**FOREIGN, "logs/my_analysis.txt": "mine", "preset/README.md": "mine"})


def _staged(directory: Path, files) -> None:
    """A directory as kbz writes it whole (with its record), and the user's files in it."""
    with staged_directory(directory) as staging:
        _seed(staging, {name: "kbz" for name in files})
    _seed(directory, {**FOREIGN, "variables/mynote.txt": "mine"})


def _finetune(ws, tiny, output, task="classify", train=SST2):
    if Path(train).parent != ws:
        train = shutil.copy(train, ws / Path(train).name)
    return [
        "finetune", task, "--preset", str(tiny), "--train", str(train), "--validation",
        str(train), "--output", str(output), "--epochs", "1", "--batch-size", "16",
        "--sequence-length", "32", "--no-jit-compile", "--no-export",
    ]  # fmt: skip


def _pretrain(ws, output):
    text = shutil.copy(TEXT, ws / "sentences.txt")
    return [
        "pretrain", "--preset", "bert_tiny_en_uncased", "--from-scratch", "--text-file",
        str(text), "--output", str(output), "--num-train-steps", "2", "--batch-size", "4",
        "--max-seq-length", "32", "--max-predictions-per-seq", "5", "--no-jit-compile",
    ]  # fmt: skip


def _predict(ws, model, task, source, output=None):
    given = Path(shutil.copy(source, ws / Path(source).name))
    output = given if output is None else output
    return ["predict", task, "--model", str(model), "--input", str(given), "--output", str(output)]


def _overwrite_finetune(ws, tiny, classifier):
    _completed_run(ws / "fin", "finetune")
    return [*_finetune(ws, tiny, ws / "fin"), "--overwrite"]


def _overwrite_pretrain(ws, tiny, classifier):
    _completed_run(ws / "pre", "pretrain")
    return [*_pretrain(ws, ws / "pre"), "--overwrite"]


def _overwrite_savedmodel(ws, tiny, classifier):
    _staged(ws / "ex" / "1", ["saved_model.pb", "variables/variables.index"])
    return ["export", str(classifier), str(ws / "ex" / "1"), "--overwrite"]


def _overwrite_onnx(ws, tiny, classifier):
    pytest.importorskip("tf2onnx")
    _staged(ws / "onnx", ["model.onnx", "export.json", "vocab.txt"])
    return ["export", str(classifier), str(ws / "onnx"), "--format", "onnx", "--overwrite"]


def _overwrite_converted(ws, tiny, classifier):
    _staged(ws / "hf", ["config.json", "model.safetensors", "vocab.txt"])
    return ["convert", str(tiny), str(ws / "hf"), "--to", "huggingface", "--overwrite"]


def _overwrite_preset(ws, tiny, classifier):
    _staged(ws / "preset", ["preset.json", "vocab.txt", "SHA256SUMS"])
    return ["convert", str(tiny), str(ws / "preset"), "--to", "huggingface", "--overwrite"]


def _nbest_of_the_user(ws, tiny, classifier):
    _seed(ws / "out", {"nbest_predictions.json": "mine", **FOREIGN})
    return _predict(ws, tiny, "qa", SQUAD, ws / "out" / "predictions.json")


def _ranked_of_the_user(ws, tiny, classifier):
    _seed(ws / "out", {"scores.ranked.tsv": "mine", **FOREIGN})
    return _predict(ws, tiny, "rerank", RERANK, ws / "out" / "scores.tsv")


def _finetune_output_holds_train(ws, tiny, classifier):
    return _finetune(ws, tiny, ws)


def _finetune_output_is_preset(ws, tiny, classifier):
    preset = shutil.copytree(tiny, ws / "preset")
    argv = _finetune(ws, preset, preset)
    return argv


def _finetune_embed_output_holds_train(ws, tiny, classifier):
    pairs = _seed(ws, {"pairs.tsv": "a question\ta passage\n" * 40}) / "pairs.tsv"
    return _finetune(ws, tiny, ws, task="embed", train=pairs)


def _pretrain_output_holds_text(ws, tiny, classifier):
    return _pretrain(ws, ws)


def _embed_output_is_input(ws, tiny, classifier):
    texts = _seed(ws, {"texts.npy": "one line\nanother\n"}) / "texts.npy"
    return ["embed", "--model", str(tiny), "--input", str(texts), "--output", str(texts)]


def _embed_output_inside_model(ws, tiny, classifier):
    model = shutil.copytree(tiny, ws / "model")
    texts = _seed(ws, {"texts.txt": "one line\n"}) / "texts.txt"
    return ["embed", "--model", str(model), "--input", str(texts), "--output", f"{model}/v.npy"]


def _export_over_its_source(ws, tiny, classifier):
    source = shutil.copytree(classifier, ws / "1")
    return ["export", str(source), str(source), "--overwrite"]


def _onnx_inside_its_source(ws, tiny, classifier):
    pytest.importorskip("tf2onnx")
    source = shutil.copytree(classifier, ws / "model")
    return ["export", str(source), str(source / "onnx"), "--format", "onnx"]


def _convert_over_its_source(ws, tiny, classifier):
    source = shutil.copytree(tiny, ws / "preset")
    return ["convert", str(source), str(source), "--to", "huggingface", "--overwrite"]


def _create_data_over_its_input(ws, tiny, classifier):
    text = shutil.copy(TEXT, ws / "sentences.txt")
    vocab = shutil.copy(UNCASED_VOCABULARY, ws / "vocab.txt")
    argv = ["create-pretraining-data", "--input_file", str(text), "--vocab_file", str(vocab)]
    return [*argv, "--output_file", str(text), "--do_lower_case"]


def _create_data_over_its_vocabulary(ws, tiny, classifier):
    argv = _create_data_over_its_input(ws, tiny, classifier)
    return [*argv[:-3], "--output_file", str(ws / "vocab.txt"), "--do_lower_case"]


CASES = [
    _overwrite_finetune, _overwrite_pretrain, _overwrite_savedmodel, _overwrite_onnx,
    _overwrite_converted, _overwrite_preset, _nbest_of_the_user, _ranked_of_the_user,
    _finetune_output_holds_train, _finetune_output_is_preset, _finetune_embed_output_holds_train,
    _pretrain_output_holds_text, _embed_output_is_input, _embed_output_inside_model,
    _export_over_its_source, _onnx_inside_its_source, _convert_over_its_source,
    _create_data_over_its_input, _create_data_over_its_vocabulary,
    *(
        lambda ws, tiny, classifier, task=task, source=source: _predict(ws, tiny, task, source)
        for task, source in (("classify", SST2), ("tag", CONLL), ("qa", SQUAD), ("rerank", RERANK))
    ),
]  # fmt: skip
IDS = [case.__name__.strip("_") for case in CASES[:-4]] + [
    f"predict_{task}_output_is_input" for task in ("classify", "tag", "qa", "rerank")
]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_writing_command_never_changes_a_file_it_did_not_write(case, presets, tmp_path, capsys):
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = case(ws, *presets)
    before = _hashes(ws)
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert _hashes(ws) == before, error
    assert ("did not write (" in error or "no kbz run wrote (" in error
            or "would overwrite the input" in error
            or "already exists. Pass --overwrite" in error), error  # fmt: skip


def test_predict_writes_beside_the_user_s_files_and_changes_none(presets, tmp_path):
    classifier = presets[1]
    out = _seed(tmp_path / "out", FOREIGN)
    before = _hashes(out)
    argv = _predict(tmp_path, classifier, "classify", SST2, out / "predictions.tsv")
    assert main([*argv, "--overwrite"]) == 0
    after = _hashes(out)
    assert {name: after[name] for name in before} == before
    assert sorted(after) == ["mine.txt", "notes/mine.txt", "predictions.tsv"]
