"""Named presets' weights: download from a loopback HTTP server, verify, convert, cache.

The server is `http.server` on 127.0.0.1 (ephemeral port, a thread, shut down in teardown)
serving zips of Google-format checkpoints written by the test; `KBZ_WEIGHTS_MIRROR` points
the download at it, so nothing but loopback is ever contacted.

Trust policy (see `keras_bert_zoo.presets.pins`): a preset pinned by `sha256` (the archive)
or `files_sha256` (the files inside) downloads with no opt-in; an unpinned one downloads
with a warning and its archive hash is recorded on first use and required afterwards;
`KBZ_REQUIRE_PINNED=1` refuses unpinned presets.
"""

import dataclasses
import functools
import hashlib
import http.server
import json
import logging
import shutil
import socket
import threading
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
from test_checkpoints import TINY_GOOGLE, random_google_variables, write_google_checkpoint

import keras_bert_zoo as kbz
from keras_bert_zoo.presets import PresetConfig, load_preset_config
from keras_bert_zoo.presets.downloads import fetch_preset_weights
from keras_bert_zoo.presets.pins import pinned_files
from keras_bert_zoo.saving.archives import safe_extract

TINY_URL = "https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-2_H-128_A-2.zip"


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


class LoopbackServer:
    """Serves `root` on 127.0.0.1:<ephemeral port> from a thread; counts requests."""

    def __init__(self, root: Path):
        self.requests = []
        owner = self

        class Handler(_Handler):
            def do_GET(self):
                owner.requests.append(self.path)
                super().do_GET()

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
        )
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join()
        self.server.server_close()


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    server = LoopbackServer(root)
    yield root, server
    server.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("KBZ_CACHE_DIR", str(directory))
    monkeypatch.delenv("KBZ_REQUIRE_PINNED", raising=False)
    monkeypatch.delenv("KBZ_WEIGHTS_MIRROR", raising=False)
    return directory


def _zip_release(folder: Path, archive: Path, top: str = "") -> str:
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.iterdir()):
            bundle.write(path, top + path.name)
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def _files_sha256(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def _recorded(cache: Path) -> dict:
    return json.loads((cache / "downloads" / "recorded_sha256.json").read_text())


def _dead_loopback_url() -> str:
    with socket.socket() as probe:  # a port nobody listens on any more
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


@pytest.fixture
def tiny_release(tmp_path):
    """A tiny Google release zip + a PresetConfig naming it (vocabulary 60, 2 layers)."""
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(55)]
    variables = random_google_variables(TINY_GOOGLE, seed=5)
    folder = write_google_checkpoint(
        tmp_path / "release" / "tiny_L-2_H-16", variables, TINY_GOOGLE, vocabulary
    )
    archive = tmp_path / "tiny_L-2_H-16.zip"
    digest = _zip_release(folder, archive, top="tiny_L-2_H-16/")
    config = PresetConfig(
        name="tiny_test",
        directory=folder,
        # as the bundled presets: no `attention_dropout` (None, `dropout`'s rate)
        architecture={k: v for k, v in TINY_GOOGLE.items() if k != "attention_dropout"},
        vocabulary_path=folder / "vocab.txt",
        lowercase=True,
        weights_source={
            "url": "https://storage.googleapis.com/bert_models/tiny_L-2_H-16.zip",
            "format": "google_tf1",
            "sha256": digest,
        },
    )
    return config, archive, variables


def test_named_preset_downloads_once_then_works_offline(
    served, cache, monkeypatch, tmp_path, caplog
):
    root, server = served
    config = load_preset_config("bert_tiny_en_uncased")
    vocabulary = config.vocabulary_path.read_text(encoding="utf-8").split("\n")[:-1]
    variables = random_google_variables(config.architecture, seed=1)
    folder = write_google_checkpoint(
        tmp_path / "release", variables, config.architecture, vocabulary
    )
    digest = _zip_release(folder, root / "uncased_L-2_H-128_A-2.zip")
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)  # no opt-in: tiny is unpinned
    keras.backend.clear_session()
    with caplog.at_level(logging.WARNING):
        encoder = kbz.from_preset("bert_tiny_en_uncased")
    assert "'bert_tiny_en_uncased' pins no sha256" in caplog.text and digest in caplog.text
    assert server.requests == ["/uncased_L-2_H-128_A-2.zip"]
    np.testing.assert_array_equal(
        encoder.get_layer("token_embedding").embeddings.numpy(),
        variables["bert/embeddings/word_embeddings"],
    )
    # no leftovers: the preset, and the archive's sha256 recorded for later downloads
    assert sorted(p.name for p in cache.iterdir()) == ["bert_tiny_en_uncased", "downloads"]
    assert [p.name for p in (cache / "downloads").iterdir()] == ["recorded_sha256.json"]
    assert _recorded(cache)["bert_tiny_en_uncased"]["sha256"] == digest
    server.stop()
    keras.backend.clear_session()
    again = kbz.from_preset("bert_tiny_en_uncased")  # offline now: served from the cache
    np.testing.assert_array_equal(
        again.get_layer("pooled_dense").kernel.numpy(), variables["bert/pooler/dense/kernel"]
    )
    assert len(server.requests) == 1
    # the release's MLM and NSP heads were kept in the cache
    pretrainer = kbz.from_preset("bert_tiny_en_uncased", task="pretrainer")
    np.testing.assert_array_equal(
        pretrainer.get_layer("nsp_head").kernel.numpy(),
        variables["cls/seq_relationship/output_weights"].T,
    )


def test_pinned_download_is_verified_and_cached(served, cache, monkeypatch, tiny_release):
    root, server = served
    config, archive, variables = tiny_release
    (root / archive.name).write_bytes(archive.read_bytes())
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    weights = fetch_preset_weights(config)
    assert weights == cache / "tiny_test" / "model.weights.safetensors"
    cached = load_preset_config(cache / "tiny_test")
    assert config.weights_source["sha256"] in cached.metadata["provenance"]
    assert cached.architecture == TINY_GOOGLE and cached.task == "pretrainer"  # heads kept


def test_checksum_mismatch_caches_nothing(served, cache, monkeypatch, tiny_release):
    root, server = served
    config, archive, _ = tiny_release
    (root / archive.name).write_bytes(archive.read_bytes())
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    wrong = dataclasses.replace(
        config, weights_source={**config.weights_source, "sha256": "0" * 64}
    )
    with pytest.raises(
        ValueError,
        match=f"Checksum mismatch for {archive.name}.*expected "
        f"sha256 0{{64}}, got {config.weights_source['sha256']}"
        ".*nothing was unpacked or cached",
    ):
        fetch_preset_weights(wrong)
    assert list(cache.iterdir()) == []  # no preset, no partial download, no temp folder


def test_server_down_without_cache_says_what_to_fetch_and_where(cache, monkeypatch):
    mirror = _dead_loopback_url()
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", mirror)
    with pytest.raises(ValueError) as error:
        kbz.from_preset("bert_tiny_en_uncased")
    message = str(error.value)
    assert f"downloading {mirror}uncased_L-2_H-128_A-2.zip failed" in message
    assert (
        f"Fetch {TINY_URL} and put it, still zipped, at "
        f"{cache / 'downloads' / 'uncased_L-2_H-128_A-2.zip'}" in message
    )
    assert "not available on this machine" in message and "load_weights=False" in message
    assert not (cache / "bert_tiny_en_uncased").exists()


def test_hand_placed_archive_is_used_offline(cache, monkeypatch, tiny_release):
    config, archive, variables = tiny_release
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", _dead_loopback_url())
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / archive.name).write_bytes(archive.read_bytes())
    weights = kbz.saving.read_weights(fetch_preset_weights(config))
    np.testing.assert_array_equal(
        weights["segment_embedding/embeddings"], variables["bert/embeddings/token_type_embeddings"]
    )


def test_archive_of_another_model_is_refused(cache, monkeypatch, tiny_release):
    config, archive, _ = tiny_release
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / archive.name).write_bytes(archive.read_bytes())
    bigger = dataclasses.replace(config, architecture={**TINY_GOOGLE, "num_layers": 4})
    with pytest.raises(ValueError, match="not preset 'tiny_test'.*wrong archive"):
        fetch_preset_weights(bigger)
    assert not (cache / "tiny_test").exists()


@pytest.mark.parametrize(
    "member, problem",
    [("../evil.txt", "climbs out"), ("/etc/evil.txt", "absolute path"), ("link", "symbolic link")],
)
def test_unsafe_zip_members_are_refused(tmp_path, member, problem):
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("ok/bert_config.json", "{}")
        info = zipfile.ZipInfo(member)
        if member == "link":
            info.external_attr = 0o120777 << 16  # a symlink entry pointing at /etc/passwd
        bundle.writestr(info, "/etc/passwd" if member == "link" else "x")
    with pytest.raises(ValueError, match=f"member '{member}' .*{problem}"):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "out").exists()


def test_truncated_archive_is_a_clear_error(tmp_path, tiny_release):
    _, archive, _ = tiny_release
    archive.write_bytes(archive.read_bytes()[:4000])
    with pytest.raises(ValueError, match="not a readable zip archive.*truncated"):
        safe_extract(archive, tmp_path / "out")


def _files_pinned(config, folder: Path):
    """`config` pinned by the sha256 of each file in `folder` (no archive hash)."""
    source = {**config.weights_source, "sha256": None, "files_sha256": _files_sha256(folder)}
    return dataclasses.replace(config, weights_source=source)


@pytest.mark.parametrize("with_meta", [True, False])
def test_files_pinned_preset_downloads_with_no_opt_in(
    served, cache, monkeypatch, tiny_release, tmp_path, with_meta
):
    root, server = served
    config, archive, variables = tiny_release
    folder = shutil.copytree(config.directory, tmp_path / "with_extras")
    meta = folder / "bert_model.ckpt.meta"
    meta.write_bytes(b"a TF1 graph, never read")
    pinned = _files_pinned(config, folder)  # pins all five files, as the bundled presets do
    if not with_meta:
        meta.unlink()  # may be absent: the converter never reads it
    (folder / "README.txt").write_text("an extra file nobody pinned is fine")
    _zip_release(folder, root / archive.name, top="tiny_L-2_H-16/")
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    weights = kbz.saving.read_weights(fetch_preset_weights(pinned))
    assert server.requests == [f"/{archive.name}"]
    np.testing.assert_array_equal(
        weights["token_embedding/embeddings"], variables["bert/embeddings/word_embeddings"]
    )
    assert sorted(p.name for p in cache.iterdir()) == ["tiny_test"]  # nothing recorded


@pytest.mark.parametrize(
    "tampered, hand_placed", [("bert_model.ckpt.index", False), ("vocab.txt", True)]
)
def test_tampered_file_inside_a_pinned_archive_is_refused(
    served, cache, monkeypatch, tiny_release, tmp_path, tampered, hand_placed
):
    root, server = served
    config, archive, _ = tiny_release
    pinned = _files_pinned(config, config.directory)
    folder = shutil.copytree(config.directory, tmp_path / "tampered")
    data = bytearray((folder / tampered).read_bytes())
    data[len(data) // 2] ^= 1  # one byte changed
    (folder / tampered).write_bytes(bytes(data))
    found = hashlib.sha256(bytes(data)).hexdigest()
    placed = cache / "downloads" / archive.name
    if hand_placed:
        placed.parent.mkdir(parents=True)
        _zip_release(folder, placed, top="tiny_L-2_H-16/")
        fix = f"Delete {placed} \\(put there by hand\\)"
    else:
        _zip_release(folder, root / archive.name, top="tiny_L-2_H-16/")
        fix = f"The file served at {server.url}{archive.name} is not the release"
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    with pytest.raises(
        ValueError,
        match=f"Checksum mismatch for {tampered} inside {archive.name} of preset 'tiny_test': "
        f"expected sha256 {pinned.weights_source['files_sha256'][tampered]} .*found {found}"
        f".*nothing was converted or cached. {fix}",
    ):
        fetch_preset_weights(pinned)
    assert server.requests == ([] if hand_placed else [f"/{archive.name}"])
    left = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    assert left == (["downloads", f"downloads/{archive.name}"] if hand_placed else [])


def test_pinned_archive_missing_a_file_is_refused(served, cache, monkeypatch, tiny_release):
    root, server = served
    config, archive, _ = tiny_release
    pinned = _files_pinned(config, config.directory)
    with zipfile.ZipFile(root / archive.name, "w") as bundle:
        for path in sorted(config.directory.iterdir()):
            if not path.name.startswith("bert_model.ckpt.data"):
                bundle.write(path, "tiny_L-2_H-16/" + path.name)
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    with pytest.raises(
        ValueError,
        match=f"{archive.name} of preset 'tiny_test' has no bert_model.ckpt.data-00000-of-00001"
        ".*nothing was cached",
    ):
        fetch_preset_weights(pinned)
    assert list(cache.iterdir()) == []


def test_unpinned_preset_records_its_archive_hash_and_requires_it_later(
    served, cache, monkeypatch, tiny_release, caplog
):
    root, server = served
    config, archive, _ = tiny_release
    unpinned = dataclasses.replace(config, weights_source={**config.weights_source, "sha256": None})
    digest = config.weights_source["sha256"]
    (root / archive.name).write_bytes(archive.read_bytes())
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo"):
        fetch_preset_weights(unpinned)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'tiny_test' pins no sha256" in r.getMessage() for r in warnings)
    assert digest in caplog.text
    assert _recorded(cache)["tiny_test"] == {
        "archive": archive.name,
        "sha256": digest,
        "url": config.weights_source["url"],
    }
    shutil.rmtree(cache / "tiny_test")
    fetch_preset_weights(unpinned)  # the same archive again: equal to the recorded hash
    shutil.rmtree(cache / "tiny_test")
    # the server now serves another zip under the same name (an extra file changes the hash)
    other = root / archive.name
    _zip_release(config.directory, other, top="tiny_L-2_H-16/")
    with zipfile.ZipFile(other, "a") as bundle:
        bundle.writestr("tiny_L-2_H-16/README.txt", "changed")
    found = hashlib.sha256(other.read_bytes()).hexdigest()
    recorded_file = cache / "downloads" / "recorded_sha256.json"
    with pytest.raises(
        ValueError,
        match=f"Checksum mismatch for {archive.name} of unpinned preset 'tiny_test': its sha256 "
        f"is {found}, but sha256 {digest} was recorded in {recorded_file}"
        ".*nothing was unpacked or cached.*delete the 'tiny_test' entry",
    ):
        fetch_preset_weights(unpinned)
    assert not (cache / "tiny_test").exists()
    # a hand-placed archive is held to the recorded hash too
    (cache / "downloads" / archive.name).write_bytes(other.read_bytes())
    with pytest.raises(ValueError, match=f"its sha256 is {found}, but sha256 {digest}.*by hand"):
        fetch_preset_weights(unpinned)
    assert sorted(p.name for p in cache.iterdir()) == ["downloads"]
    assert _recorded(cache)["tiny_test"]["sha256"] == digest  # unchanged


def test_require_pinned_refuses_unpinned_presets(served, cache, monkeypatch, tiny_release):
    _, server = served
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    monkeypatch.setenv("KBZ_REQUIRE_PINNED", "1")
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / "uncased_L-2_H-128_A-2.zip").write_bytes(b"not read")
    with pytest.raises(
        ValueError,
        match="Preset 'bert_tiny_en_uncased' pins no sha256.*KBZ_REQUIRE_PINNED=1 refuses "
        "unpinned presets, so nothing was downloaded. Unset KBZ_REQUIRE_PINNED",
    ):
        kbz.from_preset("bert_tiny_en_uncased")
    assert server.requests == [] and not (cache / "bert_tiny_en_uncased").exists()
    config, archive, _ = tiny_release  # pinned (archive sha256): still allowed
    (cache / "downloads" / archive.name).write_bytes(archive.read_bytes())
    assert fetch_preset_weights(config).is_file()
    monkeypatch.setenv("KBZ_REQUIRE_PINNED", "maybe")
    with pytest.raises(ValueError, match="KBZ_REQUIRE_PINNED='maybe' is not understood"):
        kbz.from_preset("bert_tiny_en_uncased")


PINNED_PRESETS = [
    "bert_base_en",
    "bert_base_en_uncased",
    "bert_base_multi",
    "bert_base_zh",
    "bert_large_en",
    "bert_large_en_uncased",
]
PINNED_FILES = [
    "bert_config.json",
    "bert_model.ckpt.data-00000-of-00001",
    "bert_model.ckpt.index",
    "bert_model.ckpt.meta",
    "vocab.txt",
]


GOOGLE_PRESETS = [  # all_minilm_l6_v2 is a Hugging Face file set: tests/test_minilm_preset.py
    name
    for name in kbz.list_presets()
    if load_preset_config(name).weights_source["format"] == "google_tf1"
]


@pytest.mark.parametrize("name", GOOGLE_PRESETS)
def test_bundled_presets_pin_the_files_of_their_release(name):
    config = load_preset_config(name)
    data = json.loads((kbz.presets.builtin_presets_dir() / f"{name}.json").read_text())
    source = data["weights"]["source"]
    assert source["sha256"] is None  # no hash of Google's zips is published
    if name not in PINNED_PRESETS:  # tiny/mini/small/medium: nothing published
        assert "files_sha256" not in source and pinned_files(config) == {}
        return
    files = pinned_files(config)
    assert sorted(files) == PINNED_FILES
    vocabulary = kbz.presets.builtin_presets_dir() / data["tokenizer"]["vocabulary"]
    assert vocabulary.parent.name == "vocab"
    assert files["vocab.txt"] == data["tokenizer"]["vocabulary_sha256"]
    assert files["vocab.txt"] == hashlib.sha256(vocabulary.read_bytes()).hexdigest()
    assert "NVIDIA DeepLearningExamples" in source["pins"]
    assert "1187980309bb6dd6fd1dbdd93afb326c6687f9e0" in source["pins"]


def test_malformed_file_pins_are_a_clear_error(tiny_release):
    config, _, _ = tiny_release
    pins = _files_sha256(config.directory)
    del pins["bert_model.ckpt.index"]
    partial = dataclasses.replace(
        config, weights_source={**config.weights_source, "files_sha256": pins}
    )
    with pytest.raises(ValueError, match=r"lacks \['bert_model.ckpt.index'\].*Fix the preset"):
        pinned_files(partial)
    odd = dataclasses.replace(
        config, weights_source={**config.weights_source, "files_sha256": {"../x": "0" * 64}}
    )
    with pytest.raises(ValueError, match="must map plain file names"):
        pinned_files(odd)
