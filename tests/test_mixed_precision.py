"""Mixed precision for every task: mixed_bfloat16 outputs stay within a documented tolerance
of float32 on the same weights, logits are float32, and mixed_float16 trains with loss
scaling and stays finite.

Documented tolerance (docs/scale.md): bfloat16 keeps 8 bits of mantissa, so on these models the
task outputs differ from float32 by at most 5% of their float32 range.
"""

import keras
import numpy as np
import pytest
from conftest import random_inputs

import keras_bert_zoo as kbz
from keras_bert_zoo.training import create_optimizer

TASKS = [
    ("classifier", {"num_classes": 3}),
    ("tagger", {"num_tags": 5}),
    ("question_answerer", {}),
    ("pretrainer", {"max_predictions": 4}),
    ("encoder", {}),
]


def _inputs(task):
    x = random_inputs(batch=4, length=16, lengths=[16, 12, 9, 5])
    if task == "pretrainer":
        x["mask_positions"] = np.tile(np.array([1, 2, 3, 4], "int32"), (4, 1))
    return x


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tiny_architecture_module):
    keras.utils.set_random_seed(5)
    encoder = kbz.build_encoder(**tiny_architecture_module)
    vocabulary = ["[PAD]"] + [f"t{i}" for i in range(999)]
    return {
        task: kbz.save_preset(
            kbz.tasks.build_task(task, encoder, **kwargs),
            tmp_path_factory.mktemp(task) / "p",
            vocabulary=vocabulary,
            lowercase=True,
        )
        for task, kwargs in TASKS
    }


@pytest.fixture(scope="module")
def tiny_architecture_module():
    from conftest import TINY

    return dict(TINY)


@pytest.mark.parametrize("task, kwargs", TASKS)
def test_mixed_bfloat16_close_to_float32(saved, task, kwargs):
    x = _inputs(task)
    full = kbz.from_preset(str(saved[task]), task=task)
    mixed = kbz.from_preset(str(saved[task]), task=task, dtype="mixed_bfloat16")
    for reference, value in zip(
        keras.tree.flatten(full(x)), keras.tree.flatten(mixed(x)), strict=True
    ):
        reference = np.asarray(reference, np.float32)
        value = np.asarray(value, np.float32)
        if task == "question_answerer":  # padded positions hold the -1e9 mask bias
            keep = reference > -1e8
            reference, value = reference[keep], value[keep]
        assert np.isfinite(value).all()
        scale = reference.max() - reference.min()
        assert np.abs(value - reference).max() <= 0.05 * scale


@pytest.mark.parametrize("task", ["classifier", "pretrainer"])
def test_task_logits_are_float32_under_mixed_precision(saved, task):
    kwargs = dict(TASKS)[task]
    model = kbz.from_preset(str(saved[task]), task=task, dtype="mixed_bfloat16", **kwargs)
    for value in keras.tree.flatten(model(_inputs(task))):
        assert value.dtype == "float32"


def test_mixed_float16_trains_with_loss_scaling(tiny_architecture_module):
    keras.utils.set_random_seed(6)
    encoder = kbz.build_encoder(**tiny_architecture_module, dtype="mixed_float16")
    model = kbz.build_classifier(encoder, num_classes=2)
    optimizer = create_optimizer(1e-3, total_steps=20, loss_scale=True)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    model.compile(optimizer, kbz.tasks.classifier_loss(2), jit_compile=True)
    x = random_inputs(batch=8, length=12, lengths=[12] * 8)
    y = np.arange(8) % 2
    history = model.fit(x, y, epochs=20, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
