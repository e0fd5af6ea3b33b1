"""The task models' short scripts (`task_model_scripts.py`) on JAX: load, fit on raw
data, predict, save and reload, with TensorFlow's import blocked (`conftest.py`): the
tokenization runs on the host (Hugging Face `tokenizers`, the same ids)."""

import pytest
from conftest import save_tiny_preset
from task_model_scripts import SCRIPTS


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("tiny") / "preset")


@pytest.mark.parametrize("task", sorted(SCRIPTS))
def test_task_script_on_raw_data(preset, tmp_path, task):
    script, check = SCRIPTS[task]
    check(script(preset, tmp_path))
