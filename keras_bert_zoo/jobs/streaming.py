"""What the streaming jobs (`kbz embed`, `kbz predict`) record of their model, so that a
resumed output is continued only with the model that began it (`inference.outputs`)."""

from pathlib import Path

from keras_bert_zoo.jobs.rundir import fingerprint
from keras_bert_zoo.presets.sources import model_source


def model_identity(model) -> dict:
    """The model's files (size and sha256 of each, as a training run fingerprints its
    inputs) for a preset or run directory; a bundled preset's name for a name (its weights'
    sha256 is pinned by the preset itself). A run directory's settings are included."""
    source, settings = model_source(model)
    if not isinstance(source, Path):
        return {"preset": str(source)}
    files = sorted(p for p in source.rglob("*") if p.is_file())
    return {
        "files": {str(p.relative_to(source)): fingerprint(p) for p in files},
        "settings": settings,
    }


def prediction_identity(task: str, model, predictor, window: int) -> dict:
    """What determines a streamed `kbz predict` file besides its input (a resume must match
    it): the command, the model's files, the sequence length, batch and window sizes."""
    return {
        "command": f"predict {task}",
        "model": model_identity(model),
        "sequence_length": predictor.preprocessor.sequence_length,
        "batch_size": predictor.batch_size,
        "window": window,
    }
