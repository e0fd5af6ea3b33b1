"""The task models' short scripts (`task_model_scripts.py`) on JAX: load, fit on raw
data, predict, save and reload, with TensorFlow's import blocked (`conftest.py`): the
tokenization runs on the host (Hugging Face `tokenizers`, the same ids)."""

from task_model_scripts import preset, test_task_script_on_raw_data  # noqa: F401
