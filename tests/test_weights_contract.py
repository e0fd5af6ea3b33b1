"""The weights contract: every variable path and shape of bert_tiny, per task.

Checkpoint converters are name tables over these paths and preset files are keyed by them,
so a renamed layer or a reshaped variable must fail here first. The fixture was recorded
before the package was split into subpackages (its `about` says how) and must not change
unless the contract changes on purpose.
"""

import json
from pathlib import Path

import pytest

import keras_bert_zoo as kbz

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "bert_tiny_weights.json"
TASK_ARGUMENTS = {
    "pretrainer": {"max_predictions": 20},
    "classifier": {"num_classes": 3},
    "tagger": {"num_tags": 5},
}
RECORDED = json.loads(FIXTURE.read_text())["tasks"]


@pytest.mark.parametrize("task", sorted(RECORDED))
def test_weight_paths_and_shapes_are_the_recorded_contract(task):
    model = kbz.from_preset(
        "bert_tiny_en_uncased", task=task, load_weights=False, **TASK_ARGUMENTS.get(task, {})
    )
    assert [[v.path, list(v.shape)] for v in model.weights] == RECORDED[task]
    assert model.task == task


def test_dropout_layers_hold_no_weights_and_one_per_call_site():
    encoder = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
    block = encoder.get_layer("transformer_layer_0")
    dropouts = [layer for layer in block._layers if isinstance(layer, kbz.layers.Dropout)]
    assert sorted(d.name for d in dropouts) == [
        "attention_dropout",
        "attention_output_dropout",
        "output_dropout",
    ]
    assert all(not d.weights for d in dropouts)
