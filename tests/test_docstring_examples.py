"""The examples in the package's docstrings: names that exist, and runnable examples that run.

Every `kbz.` name an example uses must resolve from `import keras_bert_zoo as kbz` (the way a
reader types it), so a renamed or moved function cannot leave a stale example behind. The
public API's modules in `RUNNABLE` hold examples that run as written on tiny settings (no
downloads, no files): they run here, with `kbz`, `keras` and `np` in scope, and their printed
results are compared. An example that needs a download or a user's files stays out of
`RUNNABLE` until it is rewritten on tiny settings.
"""

import doctest
import importlib
import re
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bert_zoo as kbz

PACKAGE = Path(kbz.__file__).parent
RUNNABLE = [
    "keras_bert_zoo",
    "keras_bert_zoo.architecture",
    "keras_bert_zoo.data",
    "keras_bert_zoo.data.readers",
    "keras_bert_zoo.data.squad_reader",
    "keras_bert_zoo.encoder",
    "keras_bert_zoo.extras",
    "keras_bert_zoo.host_memory",
    "keras_bert_zoo.layers.attention",
    "keras_bert_zoo.layers.encoder_block",
    "keras_bert_zoo.metrics",
    "keras_bert_zoo.packed_encoder",
    "keras_bert_zoo.presets",
    "keras_bert_zoo.presets.registry",
    "keras_bert_zoo.presets.sources",
    "keras_bert_zoo.pretraining",
    "keras_bert_zoo.ranking_metrics",
    "keras_bert_zoo.tokenization",
    "keras_bert_zoo.training",
    "keras_bert_zoo.training.optimizers",
    "keras_bert_zoo.training.packing",
    "keras_bert_zoo.training.progress",
]
EXAMPLE = re.compile(r"^\s*(>>>|\.\.\.) ")
NAME = re.compile(r"\bkbz((?:\.[A-Za-z_]\w*)+)")


def example_names():
    """`(where, "kbz.a.b")` for every `kbz.` name in an example line of the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if EXAMPLE.match(line):
                for chain in NAME.findall(line):
                    yield f"{path.relative_to(PACKAGE.parent)}:{number}", f"kbz{chain}"


def test_every_name_an_example_uses_exists():
    names = list(example_names())
    assert len(names) > 100  # the scan reads the examples
    missing = []
    for where, name in names:
        value = kbz
        for part in name.split(".")[1:]:
            if not hasattr(value, part):
                missing.append(f"{where}: {name} ({part} is not there)")
                break
            value = getattr(value, part)
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("module", RUNNABLE)
def test_the_examples_of_the_public_api_run(module):
    tests = doctest.DocTestFinder().find(
        importlib.import_module(module), module, extraglobs={"kbz": kbz, "keras": keras, "np": np}
    )
    tests = [test for test in tests if test.examples]
    assert tests, f"{module} has no examples to run"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
