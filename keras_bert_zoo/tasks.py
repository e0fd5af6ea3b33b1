"""Task models built on the encoder, by name, for `from_preset(..., task=...)`.

Each builder takes the encoder first and returns a functional `keras.Model`, recording
`model.kbz_task = (task_name, task_config)` so `save_preset` can write it back.
"""


def _encoder_task(encoder, dtype=None, **task_kwargs):
    if task_kwargs:
        raise ValueError(f"task='encoder' takes no task arguments. Received: {task_kwargs}")
    return encoder


TASKS = {"encoder": _encoder_task}


def build_task(task: str, encoder, dtype=None, **task_kwargs):
    """Returns `encoder` itself for "encoder", else the named task model built on it."""
    if task not in TASKS:
        raise ValueError(f"Unknown task '{task}'. Expected one of {sorted(TASKS)}.")
    model = TASKS[task](encoder, dtype=dtype, **task_kwargs)
    model.kbz_task = (task, dict(task_kwargs))
    return model
