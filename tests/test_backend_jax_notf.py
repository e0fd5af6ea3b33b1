"""`kbz finetune classify|tag|qa|rerank|embed`, `kbz predict`, `kbz embed` and `kbz pretrain
--text-file` on JAX with TensorFlow's import blocked (issue 28): numpy batches (query groups
too), the host tokenizer, exact resume. Collected only with `KERAS_BACKEND=jax`
(tests/conftest.py); the checks are tests/jobs_without_tensorflow.py.
"""

import jobs_without_tensorflow as jobs
import pytest


@pytest.fixture(autouse=True)
def blocked():
    jobs.check_tensorflow_is_blocked()


def test_finetune_classify_then_predict_gives_the_run_s_predictions(tmp_path):
    jobs.check_classify(tmp_path)


def test_finetune_tag_then_predict_gives_the_run_s_predictions(tmp_path):
    jobs.check_tag(tmp_path)


def test_finetune_qa_then_predict_gives_the_run_s_answers(tmp_path):
    jobs.check_qa(tmp_path)


def test_finetune_rerank_listwise_then_predict_gives_the_run_s_scores(tmp_path):
    jobs.check_rerank(tmp_path)


def test_embed_equals_one_batch_of_the_model(tmp_path):
    jobs.check_embed(tmp_path)


def test_finetune_embed_then_embed_with_the_run(tmp_path):
    jobs.check_finetune_embed(tmp_path)


@pytest.mark.e2e  # a kill, then the run again
def test_a_killed_finetune_embed_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    jobs.check_finetune_embed_resumes(tmp_path)


@pytest.mark.e2e  # a kill, then the run again
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    jobs.check_exact_resume(tmp_path)


@pytest.mark.e2e  # a kill, then the run again
def test_pretrain_from_text_then_a_killed_run_resumes_to_the_same_weights(tmp_path):
    jobs.check_pretrain_from_text(tmp_path)
