"""Named presets' weights: download from a loopback HTTP server, verify, convert, cache.

The server is `http.server` on 127.0.0.1 (ephemeral port, a thread, shut down in teardown)
serving zips of Google-format checkpoints written by the test; `KBZ_WEIGHTS_MIRROR` points
the download at it, so nothing but loopback is ever contacted.
"""

import dataclasses
import functools
import hashlib
import http.server
import logging
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
    monkeypatch.delenv("KBZ_ALLOW_UNPINNED", raising=False)
    return directory


def _zip_release(folder: Path, archive: Path, top: str = "") -> str:
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.iterdir()):
            bundle.write(path, top + path.name)
    return hashlib.sha256(archive.read_bytes()).hexdigest()


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
        architecture=dict(TINY_GOOGLE),
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
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    monkeypatch.setenv("KBZ_ALLOW_UNPINNED", "1")  # the bundled presets pin no sha256 yet
    keras.backend.clear_session()
    with caplog.at_level(logging.WARNING):
        encoder = kbz.from_preset("bert_tiny_en_uncased")
    assert digest in caplog.text  # logged so it can be pinned
    assert server.requests == ["/uncased_L-2_H-128_A-2.zip"]
    np.testing.assert_array_equal(
        encoder.get_layer("token_embedding").embeddings.numpy(),
        variables["bert/embeddings/word_embeddings"],
    )
    assert sorted(p.name for p in cache.iterdir()) == ["bert_tiny_en_uncased"]  # no leftovers
    server.stop()
    monkeypatch.delenv("KBZ_ALLOW_UNPINNED")
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
    monkeypatch.setenv("KBZ_ALLOW_UNPINNED", "1")
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


def test_unpinned_archive_is_not_downloaded_without_opt_in(served, cache, monkeypatch):
    _, server = served
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", server.url)
    with pytest.raises(ValueError, match="no pinned sha256.*KBZ_ALLOW_UNPINNED=1"):
        kbz.from_preset("bert_tiny_en_uncased")
    assert server.requests == []


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
