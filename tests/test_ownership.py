"""`saving.ownership`: the one rule of which files below a directory kbz wrote, used by
`--overwrite` / `overwrite=True` everywhere (runs, presets, exports, conversions)."""

import contextlib
import json
import os

import pytest

from keras_bert_zoo.jobs.rundir import RUN_LAYOUT, RunDirectory
from keras_bert_zoo.saving import ownership
from keras_bert_zoo.saving.atomic import check_replaceable, staged_directory


def _tree(root, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def _export(destination, files=("saved_model.pb", "variables/variables.index", "assets/")):
    with staged_directory(destination) as staging:
        _tree(staging, {name: "x" for name in files})


def test_leaves_are_files_links_and_empty_directories(tmp_path):
    _tree(tmp_path, {"a.txt": "", "b/c.txt": "", "d/": "", "e/f/": ""})
    (tmp_path / "link").symlink_to(tmp_path / "b")
    assert ownership.leaves(tmp_path) == ["a.txt", "b/c.txt", "d/", "e/f/", "link"]


def test_layout_patterns_match_one_segment_each():
    layout = ownership.Layout(("logs/train/events.out.tfevents.*", "export/.1.*/**", "assets/"))
    assert layout.matches("logs/train/events.out.tfevents.1.host.2.v2")
    assert not layout.matches("logs/train/my_analysis.txt")
    assert not layout.matches("logs/events.out.tfevents.1")  # `*` never crosses a `/`
    assert layout.matches("export/.1.abc/variables/variables.index")
    assert not layout.matches("export/.1.abc")  # `**` needs something below
    assert layout.matches("assets/") and layout.matches("assets")


def test_a_staged_directory_records_every_file_it_wrote(tmp_path):
    _export(tmp_path / "ex" / "1")
    listed = json.loads((tmp_path / "ex" / "1" / ownership.MANIFEST_FILE).read_text())["files"]
    assert listed == ["assets/", "saved_model.pb", "variables/variables.index"]
    assert ownership.foreign_files(tmp_path / "ex" / "1") == []


@pytest.mark.parametrize(
    "foreign", ["notes.txt", "variables/mynote.txt", "assets.extra/mynote.txt", "assets/a/b.txt",
                "mine/"],
)  # fmt: skip
def test_overwrite_refuses_any_foreign_file_at_any_depth(tmp_path, foreign):
    destination = tmp_path / "ex" / "1"
    _export(destination)
    _tree(destination, {foreign: "mine"})
    before = ownership.leaves(destination)
    with pytest.raises(ValueError, match=f"holds files kbz did not write \\({foreign}\\)"):
        check_replaceable(destination, ownership.SAVED_MODEL, True, "a version")
    assert ownership.leaves(destination) == before


def test_a_directory_without_record_is_owned_only_by_its_exact_structure(tmp_path):
    old = tmp_path / "old"  # as an older kbz wrote a SavedModel: no manifest
    _tree(old, {"saved_model.pb": "", "variables/variables.index": "", "assets/": "",
                "variables/variables.data-00000-of-00001": "",
                "assets.extra/tf_serving_warmup_requests": ""})  # fmt: skip
    assert check_replaceable(old, ownership.SAVED_MODEL, True, "a version") == old
    _tree(old, {"assets.extra/mynote.txt": "mine"})
    with pytest.raises(ValueError, match=r"\(assets.extra/mynote.txt\)"):
        check_replaceable(old, ownership.SAVED_MODEL, True, "a version")


def test_a_listed_name_in_a_manifest_is_owned_but_nothing_else(tmp_path):
    """The record wins over the structure: a name the writer could write but did not is
    foreign once a manifest exists."""
    _export(tmp_path / "1", files=("saved_model.pb",))
    _tree(tmp_path / "1", {"fingerprint.pb": "mine"})
    assert ownership.foreign_files(tmp_path / "1", layout=ownership.SAVED_MODEL) == [
        "fingerprint.pb"
    ]


def test_the_error_names_five_files_and_counts_the_rest(tmp_path):
    _tree(tmp_path / "d", {f"n{i}.txt": "" for i in range(8)})
    with pytest.raises(ValueError, match=r"\(n0.txt, n1.txt, n2.txt, n3.txt, n4.txt and 3 more\)"):
        check_replaceable(tmp_path / "d", ownership.ONNX, True, "an ONNX export")


def test_remove_owned_keeps_foreign_files_and_their_folders(tmp_path):
    run = tmp_path / "run"
    _tree(run, {"run.json": "{}", "logs/train/events.out.tfevents.1.h.2.v2": "",
                "logs/my_analysis.txt": "mine", "checkpoints/ckpt-1.weights.h5": "",
                "preset/preset.json": "", "preset/README.md": "mine", "empty/": ""})  # fmt: skip
    ownership.remove_owned(run, layout=RUN_LAYOUT)
    assert ownership.leaves(run) == ["empty/", "logs/my_analysis.txt", "preset/README.md"]


# --- a run's directory: its record once complete, its structure until then --------------


def _complete_run(output, files: dict):
    with RunDirectory(output, "finetune", {"a": 1}, {}) as run:
        _tree(output, files)
        run.complete({"accuracy": 1.0})


def test_a_complete_run_records_its_files_and_not_the_users(tmp_path):
    output = tmp_path / "fin"  # notes.txt: a user's file written during the run, never recorded
    events = "logs/train/events.out.tfevents.1.h.2.v2"
    files = {"metrics.json": "{}", events: "", "notes.txt": "mine", "checkpoints/state.json": ""}
    _complete_run(output, {**files, "checkpoints/ckpt-1.weights.h5": ""})
    record = json.loads((output / "run.json").read_text())
    assert record["files"] == [events, "metrics.json", "run.json"]
    assert not (output / "checkpoints").exists()  # the run's checkpoints went at completion
    with pytest.raises(ValueError, match=r"no kbz run wrote \(notes.txt\)"):
        RunDirectory(output, "finetune", {"a": 2}, {}, overwrite=True).__enter__()


@pytest.mark.parametrize(
    "foreign", ["logs/my_analysis.txt", "preset/README.md", "logs/train/notes.txt",
                "checkpoints/mine.h5", "export/1/variables/mynote.txt"],
)  # fmt: skip
def test_overwrite_of_a_run_refuses_nested_foreign_files(tmp_path, foreign):
    output = tmp_path / "fin"
    _complete_run(output, {"metrics.json": "{}", "logs/train/events.out.tfevents.1.h.2.v2": ""})
    _tree(output, {foreign: "mine"})
    before = {p: (output / p).read_bytes() for p in ownership.leaves(output) if "." in p}
    with pytest.raises(ValueError, match=f"no kbz run wrote \\({foreign}\\)"):
        RunDirectory(output, "finetune", {"a": 2}, {}, overwrite=True).__enter__()
    assert {p: (output / p).read_bytes() for p in before} == before
    (output / foreign).unlink()
    with contextlib.suppress(OSError):  # the user's own folders: kbz never deletes them
        os.removedirs((output / foreign).parent)
    with RunDirectory(output, "finetune", {"a": 2}, {}, overwrite=True):
        assert not (output / "metrics.json").exists() and not (output / "logs").exists()


def test_a_killed_run_owns_only_its_structure(tmp_path):
    output = tmp_path / "fin"
    _tree(output, {"run.json": json.dumps({"command": "finetune", "settings": {"a": 1},
                                           "inputs": {}, "status": "running"}),
                   "checkpoints/ckpt-1.weights.h5": "", "checkpoints/state.json": "",
                   "checkpoints/.ckpt-2.weights.abc.weights.h5": "",
                   "logs/validation/events.out.tfevents.9.h.1.v2": "",
                   ".preset.k2j3/preset.json": "", "logs/validation/mine.txt": "mine"})  # fmt: skip
    with pytest.raises(ValueError, match=r"no kbz run wrote \(logs/validation/mine.txt\)"):
        RunDirectory(output, "finetune", {"a": 2}, {}, overwrite=True).__enter__()
    (output / "logs/validation/mine.txt").unlink()
    with RunDirectory(output, "finetune", {"a": 2}, {}, overwrite=True):
        assert ownership.leaves(output) == [".lock", "run.json"]


def test_a_run_refuses_foreign_files_in_the_folders_it_replaces_before_any_work(tmp_path):
    output = tmp_path / "fin"  # a run to resume, and a user's file in the preset it will write
    record = {"command": "finetune", "settings": {"a": 1}, "inputs": {}, "status": "running"}
    _tree(output, {"run.json": json.dumps(record), "checkpoints/state.json": "{}",
                   "preset/README.md": "mine"})  # fmt: skip
    with pytest.raises(ValueError, match=r"\(preset/README.md\); the run replaces preset/"):
        RunDirectory(output, "finetune", {"a": 1}, {}).__enter__()
    assert ownership.leaves(output) == ["checkpoints/state.json", "preset/README.md", "run.json"]
