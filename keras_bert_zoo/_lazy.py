"""Lazy package attributes (PEP 562): names are imported when first used.

Keeps `import keras_bert_zoo` and the `kbz` command line free of Keras and TensorFlow until
a name that needs them is used.
"""

import importlib


def lazy_attributes(package: str, exports: dict, submodules=()):
    """`(__getattr__, __dir__)` for `package`: `exports` maps a name to its module."""
    names = sorted([*exports, *submodules])

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__():
        return names

    return __getattr__, __dir__
