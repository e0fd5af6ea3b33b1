"""A preset's `architecture` block: exactly `build_encoder`'s keyword arguments.

Kept free of Keras so that presets can be listed and checked without importing it (the
`kbz` command line answers `kbz presets` at once); `tests/test_presets.py` keeps
`ARGUMENTS` equal to `build_encoder`'s signature.
"""

REQUIRED = object()  # marks an argument without a default
ARGUMENTS = {  # build_encoder's architecture arguments and their defaults
    "vocabulary_size": REQUIRED,
    "num_layers": REQUIRED,
    "num_heads": REQUIRED,
    "hidden_dim": REQUIRED,
    "intermediate_dim": REQUIRED,
    "max_sequence_length": 512,
    "num_segments": 2,
    "dropout": 0.1,
    "gelu_approximate": False,
    "attention_dropout": None,  # None: the same rate as `dropout`
    "attention": "auto",  # how attention is computed, not what: the same weights either way
}


def check_architecture(architecture, source) -> dict:
    """Validates an `architecture` block: exactly `build_encoder`'s keyword arguments.

    >>> tiny = dict(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16,
    ...             intermediate_dim=32)
    >>> kbz.architecture.check_architecture(tiny, "preset.json") == tiny
    True
    """
    if not isinstance(architecture, dict):
        raise ValueError(f"{source}: `architecture` must be an object. Received: {architecture!r}")
    required = [name for name, default in ARGUMENTS.items() if default is REQUIRED]
    unknown = sorted(set(architecture) - set(ARGUMENTS))
    missing = sorted(set(required) - set(architecture))
    if unknown or missing:
        raise ValueError(
            f"{source}: `architecture` must hold exactly build_encoder's arguments "
            f"{list(ARGUMENTS)}. Unknown: {unknown}; missing: {missing}."
        )
    return dict(architecture)


def attention_dropout_rate(architecture: dict) -> float:
    """The attention-probability dropout an architecture trains with (None means `dropout`).

    >>> kbz.architecture.attention_dropout_rate({"dropout": 0.1})
    0.1
    """
    arguments = {**ARGUMENTS, **architecture}
    rate = arguments["attention_dropout"]
    return arguments["dropout"] if rate is None else rate


def normalized(architecture: dict) -> dict:
    """`architecture` with every default filled in and `attention_dropout` resolved, so two
    blocks that build the same encoder compare equal (files written before an argument
    existed lack it).

    >>> kbz.architecture.normalized({"vocabulary_size": 30522, "dropout": 0.2})["attention_dropout"]
    0.2
    """
    return {**ARGUMENTS, **architecture, "attention_dropout": attention_dropout_rate(architecture)}


def parameter_count(architecture: dict) -> int:
    """Parameters of the encoder with pooler, from its architecture alone (no model built).

    >>> kbz.architecture.parameter_count(kbz.presets.load_preset_config("bert_tiny_en_uncased")
    ...                                  .architecture)
    4385920
    """
    arguments = {**ARGUMENTS, **architecture}
    h, i = arguments["hidden_dim"], arguments["intermediate_dim"]
    embeddings = (
        arguments["vocabulary_size"]
        + arguments["max_sequence_length"]
        + arguments["num_segments"]
        + 2
    ) * h
    block = (h * 3 * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    return embeddings + arguments["num_layers"] * block + h * h + h
