"""Apache Beam (issue 48): `keras_bert_zoo.beam.KbzModelHandler` on Beam's local runner with
two worker processes gives `kbz embed`'s vectors and `kbz predict classify`'s probabilities,
and `examples/beam_embed.py` writes every line once into its shards.

Skipped where apache-beam is not installed (the `beam` extra)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main

beam = pytest.importorskip("apache_beam", reason="the `beam` extra is not installed")
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from keras_bert_zoo.beam import KbzModelHandler  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORDS = (ROOT / "tests" / "data" / "finetune" / "sst2_train_head.tsv").read_text().split()
TWO_PROCESSES = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def _texts(count, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(1, 40))) for _ in range(count)]


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    root = tmp_path_factory.mktemp("beam")
    encoder = save_tiny_preset(root / "encoder")
    model = kbz.from_preset(
        str(encoder), task="classifier", num_classes=2, label_names=["no", "yes"]
    )
    return {"embedder": encoder, "classifier": kbz.save_preset(model, root / "classifier")}


def test_the_handler_decodes_vectors_labels_and_pairs(presets):
    embedder = KbzModelHandler(presets["embedder"])
    model = embedder.load_model()
    results = list(embedder.run_inference(["a text", "", "a longer text than that"], model))
    assert [r.example for r in results] == ["a text", "", "a longer text than that"]
    expected = kbz.jobs.embed_texts(
        model.network, model.preprocessor, ["a text", "", "a longer text than that"]
    )
    np.testing.assert_array_equal(np.stack([r.inference for r in results]), expected)
    classifier = KbzModelHandler(presets["classifier"], task="classifier")
    model = classifier.load_model()
    results = list(classifier.run_inference(["good", ("a premise", "a hypothesis")][:1], model))
    assert set(results[0].inference) == {"label", "scores"}
    scores = results[0].inference["scores"]
    assert set(scores) == {"no", "yes"} and abs(sum(scores.values()) - 1) < 1e-6
    assert results[0].inference["label"] == max(scores, key=scores.get)
    pairs = list(classifier.run_inference([("a premise", "a hypothesis")], model))
    assert pairs[0].inference["label"] in ("no", "yes")
    with pytest.raises(ValueError, match="Unknown task 'tag'"):
        KbzModelHandler(presets["classifier"], task="tag")


@pytest.mark.e2e  # Beam's local runner with two worker processes
def test_classify_on_two_local_workers_equals_kbz_predict(presets, tmp_path):
    texts = _texts(200, seed=3)
    tsv = tmp_path / "in.tsv"
    tsv.write_text("sentence\n" + "".join(t + "\n" for t in texts))
    command = ["predict", "classify", "--model", str(presets["classifier"]), "--input", str(tsv)]
    assert main([*command, "--output", str(tmp_path / "p.tsv"), "--no-jit-compile"]) == 0
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    handler = KeyedModelHandler(KbzModelHandler(presets["classifier"], task="classifier"))
    output = tmp_path / "beam"
    with beam.Pipeline(options=PipelineOptions(TWO_PROCESSES)) as pipeline:
        _ = (
            pipeline
            | beam.Create(list(enumerate(texts)))
            | RunInference(handler)
            | beam.MapTuple(lambda i, r: json.dumps([i, r.inference]))
            | beam.io.WriteToText(str(output), num_shards=2)
        )
    results = dict(
        json.loads(line)
        for shard in tmp_path.glob("beam-*")
        for line in shard.read_text().splitlines()
    )
    assert sorted(results) == list(range(len(texts)))
    for i, (index, label, no, yes) in enumerate(rows):
        assert int(index) == i and results[i]["label"] == label
        np.testing.assert_allclose(
            [results[i]["scores"]["no"], results[i]["scores"]["yes"]],
            [float(no), float(yes)],
            atol=2e-6,
        )


@pytest.mark.e2e  # the example script, as a user runs it, on two worker processes
def test_beam_embed_example_equals_kbz_embed(presets, tmp_path):
    texts = _texts(300, seed=5)
    (tmp_path / "in.txt").write_text("".join(t + "\n" for t in texts))
    command = ["embed", "--model", str(presets["embedder"]), "--input", str(tmp_path / "in.txt")]
    assert main([*command, "--output", str(tmp_path / "v.npy")]) == 0
    script = [
        sys.executable,
        str(ROOT / "examples" / "beam_embed.py"),
        "--model",
        str(presets["embedder"]),
    ]
    script += [
        "--input",
        str(tmp_path / "in.txt"),
        "--output",
        str(tmp_path / "out" / "vectors"),
        *TWO_PROCESSES,
    ]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(script, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    shards = sorted((tmp_path / "out").glob("vectors-*-of-00002.jsonl"))
    assert len(shards) == 2
    rows = [json.loads(line) for shard in shards for line in shard.read_text().splitlines()]
    assert sorted(r["line"] for r in rows) == list(range(1, len(texts) + 1))  # each line once
    vectors = np.array([r["vector"] for r in sorted(rows, key=lambda r: r["line"])], np.float32)
    np.testing.assert_allclose(vectors, np.load(tmp_path / "v.npy"), atol=1e-6)
