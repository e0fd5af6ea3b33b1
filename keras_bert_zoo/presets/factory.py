"""`from_preset`: a model from a named preset or a preset directory, weights included.

A named preset whose weights are not cached yet is downloaded, verified and converted first
(`downloads`), keeping the release's MLM/NSP heads in the cache. A fine-tuned preset gives
its task model by default, as keras-hub's task `from_preset` does; `task="encoder"` the
encoder alone.
"""

import contextlib

from keras_bert_zoo.encoder import build_encoder
from keras_bert_zoo.layers.common import weights_follow
from keras_bert_zoo.presets.downloads import fetch_preset_weights
from keras_bert_zoo.presets.registry import cache_dir, load_preset_config
from keras_bert_zoo.saving.preset import PresetConfig, read_preset_weights
from keras_bert_zoo.saving.vocabulary import load_vocabulary
from keras_bert_zoo.saving.weights import assign_weights, draw_again
from keras_bert_zoo.task_graphs import build_task, check_task
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.tasks.registry import SPECS

_TASKS_WITHOUT_POOLER = tuple(name for name, spec in SPECS.items() if not spec.pooler)
# Presets whose task is not what people load them for: a checkpoint's MLM/NSP heads.
_ENCODER_BY_DEFAULT = ("encoder", "pretrainer")


def default_task(config: PresetConfig) -> str:
    """The model `from_preset(dir)` gives without `task`: the fine-tuned task a preset was
    saved as (classifier, tagger, question_answerer, embedder), else "encoder"."""
    return "encoder" if config.task in _ENCODER_BY_DEFAULT else config.task


def _no_weights_error(config: PresetConfig) -> ValueError:
    return ValueError(
        f"Pretrained weights for preset '{config.name}' are not available on this machine "
        f"(looked in {config.weights_path or config.directory}). Use load_weights=False for the "
        f"architecture with fresh random weights, or convert a local checkpoint with "
        f"`kbz convert SRC_DIR {cache_dir() / config.name}` (or any DST_DIR, then "
        "kbz.from_preset(DST_DIR))."
    )


def _check_sizes(config: PresetConfig, encoder) -> None:
    vocabulary_lines = len(load_vocabulary(config.vocabulary_path))
    if vocabulary_lines != config.architecture["vocabulary_size"]:
        raise ValueError(
            f"Preset '{config.name}': its vocabulary {config.vocabulary_path} has "
            f"{vocabulary_lines} tokens but the architecture's vocabulary_size is "
            f"{config.architecture['vocabulary_size']}. They must be equal; re-create the preset."
        )
    if config.num_parameters is not None and encoder.count_params() != config.num_parameters:
        raise ValueError(
            f"Preset '{config.name}' expects {config.num_parameters:,} parameters; its "
            f"architecture builds {encoder.count_params():,}. The preset file is inconsistent."
        )


def _load_weights(model, encoder, config: PresetConfig, same_task: bool) -> None:
    tensors = read_preset_weights(config)
    encoder_paths = {v.path for v in encoder.weights}
    model_paths = {v.path for v in model.weights}
    new_ok = set() if same_task else model_paths - encoder_paths
    if config.task in _TASKS_WITHOUT_POOLER:  # their graphs never held the pooler
        new_ok |= {p for p in encoder_paths if p.startswith("pooled_dense/")}
    # another task's head, and encoder parts this task's graph leaves out (the pooler)
    unused_ok = (set() if same_task else set(tensors) - encoder_paths) | (
        encoder_paths - model_paths
    )
    assign_weights(model.weights, tensors, config.weights_path, new_ok=new_ok, unused_ok=unused_ok)
    # The encoder was built under `weights_follow` (zeros, no random draw): what the model
    # holds and the file lacks (the pooler of a tagger's preset) is drawn now. What the task's
    # graph leaves out (a tagger's pooler) is not part of the model.
    lacking = [v for v in encoder.weights if v.path in model_paths and v.path not in tensors]
    draw_again(encoder, lacking)


def preset_with_weights(name_or_dir) -> PresetConfig:
    """The preset's config once its weights are on this machine: a named preset's are
    downloaded, verified and converted first (jobs ask before writing anything)."""
    config = load_preset_config(name_or_dir)
    if config.weights_path is None or not config.weights_path.is_file():
        if not config.weights_source:
            raise _no_weights_error(config)
        fetch_preset_weights(config)  # converts into the cache, with the release's heads
        config = load_preset_config(name_or_dir)  # now names the cached weights and task
    return config


def from_preset(
    name_or_dir, task: str | None = None, load_weights: bool = True, dtype=None, **task_kwargs
):
    """Builds a model from a named preset or a preset directory.

    Args:
        name_or_dir: a name from `list_presets()` or a directory written by `save_preset` /
            `kbz convert`.
        task: None (the default) gives the model the preset holds: a fine-tuned
            classifier, tagger, question answerer or embedder with its head and settings,
            else the encoder (also for a "pretrainer" preset, whose MLM/NSP heads
            `task="pretrainer"` gives). "encoder" always gives the bare encoder. Another
            task name (see `keras_bert_zoo.tasks.TASKS`) builds that task model; its head is
            new unless the preset was saved from the same task (then its settings are reused).
            "embedder" takes its pooling from the preset's `embedder` block when it has one
            (sentence-transformers checkpoints record it when converted).
        load_weights: False builds the architecture with fresh random weights.
        dtype: a dtype policy name such as "mixed_bfloat16".
        **task_kwargs: arguments of the task builder (e.g. `num_classes`).

    >>> enc = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
    >>> clf = kbz.from_preset("runs/sst2/preset")  # the fine-tuned classifier, its head
    >>> enc = kbz.from_preset("runs/sst2/preset", task="encoder")  # its encoder alone
    >>> emb = kbz.from_preset("all_minilm_l6_v2", task="embedder")  # mean pooling, normalised
    """
    config = load_preset_config(name_or_dir)
    if task is not None:
        check_task(task)
    if load_weights:
        config = preset_with_weights(name_or_dir)
    task = default_task(config) if task is None else task
    # With weights to load, the encoder's random draws would be overwritten: skip them.
    with weights_follow() if load_weights else contextlib.nullcontext():
        encoder = build_encoder(**config.architecture, dtype=dtype)
    _check_sizes(config, encoder)
    same_task = task == config.task
    if same_task:
        task_kwargs = {**config.task_config, **task_kwargs}
    elif getattr(registry.find(task), "vectors", False):  # the preset's recorded pooling
        task_kwargs = {**config.embedder, **task_kwargs}
    model = build_task(task, encoder, **task_kwargs)
    if load_weights:
        _load_weights(model, encoder, config, same_task)
    model.preset_config = config  # its vocabulary, for save_preset and the preprocessor
    return model
