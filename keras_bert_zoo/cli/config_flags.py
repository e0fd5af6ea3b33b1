"""Command-line flags generated from a run config's fields (`jobs.config`), and the config
built back from the parsed flags: a flag's name, type, default and help are the field's.

As transformers' `HfArgumentParser`: a field without a default is a required flag, a bool a
switch (`--bucketing/--no-bucketing` when on by default, or unset: `bool | None`, decided by
the run), `choices` from the field.
"""

import argparse
import dataclasses
import types
import typing


def _kind(field):
    """argparse's `type` for a field annotated `int`, `float | None`, `str`, ..."""
    kinds = typing.get_args(field.type) if isinstance(field.type, types.UnionType) else ()
    kind = next((k for k in kinds if k is not type(None)), field.type)
    return kind if kind in (int, float, str) else None


def _shown(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_config_flags(parser, config, names, defaults=None, shown=None, helps=None) -> None:
    """The flags of `config`'s fields `names`, in that order. `defaults`: a flag's default
    other than the field's (None: resolved later, e.g. by the backend); `shown`: the default
    as `--help` says it; `helps`: the help of a required flag, if not the field's; by name."""
    fields = {field.name: field for field in dataclasses.fields(config)}
    defaults, shown, helps = defaults or {}, shown or {}, helps or {}
    for name in names:
        field, flag = fields[name], "--" + name.replace("_", "-")
        meta = field.metadata
        if field.default is dataclasses.MISSING and name not in defaults:
            parser.add_argument(flag, required=True, help=helps.get(name, meta["help"]))
            continue
        default = defaults.get(name, field.default)
        said = shown.get(name, meta.get("shown", _shown(field.default)))
        help = f"{meta['help']} (default: {said})"
        if field.type is bool and field.default is False:
            parser.add_argument(flag, action="store_true", help=help)
        elif field.type in (bool, bool | None):  # None: decided by the run ("auto")
            action = argparse.BooleanOptionalAction
            parser.add_argument(flag, action=action, default=default, help=help)
        else:
            kind, choices = _kind(field), meta.get("choices")
            parser.add_argument(flag, type=kind, choices=choices, default=default, help=help)


def config_from_args(config, args, **given):
    """`config(...)` from the parsed flags of its fields (`given` wins); fields that are no
    flag (`setting(..., flag=False)`, such as `verbose`) keep their defaults."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(config)
        if f.metadata.get("flag", True) and f.name in args
    }
    return config(**{**values, **given})
