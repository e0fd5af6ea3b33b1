"""Atomic writes: the old content survives until the new one is complete and on disk."""

import os

import pytest

from keras_bert_zoo.saving import atomic
from keras_bert_zoo.saving.ownership import MANIFEST_FILE


def _tree(root):
    """What the writer wrote (the manifest `staged_directory` adds is tested in test_ownership)."""
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MANIFEST_FILE
    }


def _write(destination, content: str):
    with atomic.staged_directory(destination) as staging:
        (staging / "data.txt").write_text(content)
        (staging / "sub").mkdir()
        (staging / "sub" / "more.txt").write_text(content * 2)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "rename-aside"])
def test_an_existing_directory_is_replaced_whole(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda first, second: False)
    _write(tmp_path / "out", "old")
    _write(tmp_path / "out", "new")
    assert _tree(tmp_path / "out") == {"data.txt": "new", "sub/more.txt": "newnew"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left beside it


def test_a_failure_while_writing_leaves_the_old_directory(tmp_path):
    _write(tmp_path / "out", "old")
    with (
        pytest.raises(OSError, match="disk full"),
        atomic.staged_directory(tmp_path / "out") as staging,
    ):
        (staging / "data.txt").write_text("half")
        raise OSError("disk full")
    assert _tree(tmp_path / "out") == {"data.txt": "old", "sub/more.txt": "oldold"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_crash_between_the_two_renames_is_repaired_by_the_next_write(tmp_path, monkeypatch):
    """Without an atomic exchange the old directory is renamed aside first; a crash right
    then leaves it as `.out.old`, and the next write (or `recover`) puts it back."""
    _write(tmp_path / "out", "old")
    monkeypatch.setattr(atomic, "_exchange", lambda first, second: False)
    renames = []

    def crash_on_second_rename(source, destination):
        renames.append(destination)
        if len(renames) == 2:
            raise KeyboardInterrupt("power cut")
        os.replace(source, destination)

    monkeypatch.setattr(atomic.os, "rename", crash_on_second_rename)
    with pytest.raises(KeyboardInterrupt):
        _write(tmp_path / "out", "new")
    monkeypatch.undo()
    assert not (tmp_path / "out").exists() and (tmp_path / ".out.old").is_dir()
    atomic.recover(tmp_path / "out")
    assert _tree(tmp_path / "out") == {"data.txt": "old", "sub/more.txt": "oldold"}


def test_staged_file_and_json_replace_in_one_step(tmp_path):
    atomic.write_json(tmp_path / "m.json", {"b": 1, "a": 2})
    assert (tmp_path / "m.json").read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'
    with pytest.raises(ValueError), atomic.staged_file(tmp_path / "m.json") as temporary:
        temporary.write_text("partial")
        raise ValueError("interrupted")
    assert (tmp_path / "m.json").read_text().startswith('{\n  "a": 2')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]
    with atomic.staged_file(tmp_path / "ckpt-1.weights.h5") as temporary:
        assert temporary.name.endswith(".weights.h5")  # Keras checks the suffix
        temporary.write_bytes(b"weights")
    assert (tmp_path / "ckpt-1.weights.h5").read_bytes() == b"weights"
