"""The package's shape: imports run one way, no cycles, short modules, a lazy top level.

The import graph is read from the source with `ast` (module-level and function-level
imports alike), so a cycle hidden inside a function still fails here.
"""

import ast
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "keras_bert_zoo"
# Lowest first. A module may import modules of its own rank or below, never above.
RANKS = [
    {
        "layers",
        "choices",
        "console",
        "architecture",
        "_lazy",
        "extras",
        "host_memory",
    },
    {
        "model",
        "encoder",
        "packed_encoder",
        "pretraining",
        "task_graphs",
        "group_scoring",
        "metrics",
        "ranking_metrics",
        "lora",
    },
    {"saving"},
    {"checkpoints"},
    {"presets"},
    {"tokenization"},
    {"data"},
    {"export"},
    {"training", "inference"},
    {"runtimes"},
    {"finetuning", "tasks"},
    {"jobs"},
    {"cli", "beam"},
]
MAX_LINES = 300
HARD_MAX_LINES = 450
CLI = "keras_bert_zoo.cli"
GENERATED = {"keras_bert_zoo.tokenization._unicode_tables"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> list[tuple[str, int, bool]]:
    """`(imported package module, line, inside a function)` for each import of `name`."""
    tree = ast.parse(MODULES[name].read_text())
    function_lines = {
        node.lineno
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import submodule` depends on the submodule; parent packages are
            # imported before any module and are not edges of the graph.
            submodules = [
                f"{node.module}.{a.name}"
                for a in node.names
                if f"{node.module}.{a.name}" in MODULES
            ]
            targets = submodules or [node.module]
        else:
            continue
        for target in targets:
            if target in MODULES and target != "keras_bert_zoo":
                found.append((target, node.lineno, node.lineno in function_lines))
    return found


GRAPH = {name: sorted({target for target, _, _ in _imports(name)}) for name in MODULES}


def _is_task_data(name: str) -> bool:
    """The tasks' specs and their registry (`tasks/registry.py`, `tasks/spec.py`,
    `tasks/<task>/spec.py` and the packages above them): plain data every layer reads,
    `kbz --help` too, so they rank at the bottom although they live beside the task models."""
    parts = name.split(".")
    if parts[:2] != ["keras_bert_zoo", "tasks"]:
        return False
    package = MODULES[name].name == "__init__.py"
    return package or parts[2:] in (["registry"], ["spec"]) or parts[3:] == ["spec"]


def _rank(name: str) -> int:
    if _is_task_data(name):
        return 0
    top = name.split(".")[1]
    return next(i for i, group in enumerate(RANKS) if top in group)


def test_every_top_level_part_has_a_rank():
    tops = {name.split(".")[1] for name in MODULES if name != "keras_bert_zoo"}
    assert tops <= set().union(*RANKS), tops - set().union(*RANKS)


def test_no_import_cycles():
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in GRAPH[node]:
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = "done"

    for name in GRAPH:
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_imports_never_climb_to_a_higher_layer():
    climbs = [
        f"{name} imports {target}"
        for name in GRAPH
        if name != "keras_bert_zoo"
        for target in GRAPH[name]
        if _rank(target) > _rank(name)
    ]
    assert not climbs, "\n".join(climbs)


# A string naming a task outside `keras_bert_zoo/tasks/` is a central table or a branch that
# a new task would have to edit; code reads the task's spec (`tasks.registry`) instead, or
# imports the one task it is about (`EMBEDDER.name` in `kbz embed`). Each exception says why.
TASK_NAME_EXCEPTIONS = {
    ("keras_bert_zoo.saving.preset", "embedder"): "the preset file's `embedder` block "
    "(sentence-transformers pooling an encoder preset records), a key of the file format",
    ("keras_bert_zoo.checkpoints.common", "embedder"): "the same preset-file key, written by "
    "the converters",
}


def test_no_module_outside_tasks_names_a_task():
    from keras_bert_zoo.tasks import registry

    names, seen, problems = set(registry.names()), set(), []
    for name, path in MODULES.items():
        if name.split(".")[:2] == ["keras_bert_zoo", "tasks"]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                if (name, node.value) in TASK_NAME_EXCEPTIONS:
                    seen.add((name, node.value))
                else:
                    problems.append(f"{name}:{node.lineno}: {node.value!r}")
    assert not problems, "\n".join(problems)
    assert seen == set(TASK_NAME_EXCEPTIONS)  # an exception no longer needed goes


# Modules that import TensorFlow at their top, imported inside the function that needs them so
# that JAX and PyTorch never import TensorFlow where it happens to be installed (issue 28).
TENSORFLOW_IMPLEMENTATIONS = {"keras_bert_zoo.tokenization.graph", "keras_bert_zoo.export.onnx"}


def test_function_level_imports_are_rare_and_give_a_reason():
    """Only a command of the CLI imports its job inside a function (so `kbz --help` stays
    instant), and a TensorFlow implementation is imported where it is used; every
    function-level import says why in a comment on its line."""
    problems = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    text = lines[node.lineno - 1]
                    module = getattr(node, "module", None)  # `from module import name`
                    targets = {a.name for a in node.names} | {
                        f"{module}.{a.name}" for a in node.names
                    }
                    lazy_tf = bool(targets & TENSORFLOW_IMPLEMENTATIONS)
                    package = "keras_bert_zoo" in text and not name.startswith(CLI) and not lazy_tf
                    if package or "#" not in text:
                        problems.append(f"{name}:{node.lineno}: {text.strip()}")
    assert not problems, "\n".join(problems)


def test_modules_stay_readable():
    """Over MAX_LINES a module gets a warning (split it by concept, never by size); over
    HARD_MAX_LINES it fails: one file then holds several concepts."""
    too_long = []
    for name in sorted(set(MODULES) - GENERATED):
        lines = len(MODULES[name].read_text().splitlines())
        if lines > HARD_MAX_LINES:
            too_long.append(f"{name}: {lines} lines")
        elif lines > MAX_LINES:
            warnings.warn(f"{name} has {lines} lines (guidance: {MAX_LINES})", stacklevel=1)
    assert not too_long, "\n".join(too_long)


def _python(code: str, **env) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.e2e  # a fresh interpreter
def test_import_and_command_line_help_load_neither_keras_nor_tensorflow():
    out = _python(
        "import sys, contextlib, io\n"
        "import keras_bert_zoo as kbz\n"
        "from keras_bert_zoo.cli import main\n"
        "for argv in (['--help'], ['--version'], ['presets'], ['finetune', '--help']):\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        main(argv)\n"
        "print(sorted(m for m in ('keras', 'tensorflow', 'tensorflow_text') if m in sys.modules))\n"
        "print(kbz.__version__)\n"
    )
    assert out.splitlines() == ["[]", __import__("keras_bert_zoo").__version__]


@pytest.mark.e2e  # a fresh interpreter
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_jax_and_torch_jobs_never_import_an_installed_tensorflow(backend):
    """TensorFlow is installed here (this suite's own backend), yet every job on JAX or
    PyTorch and the tokenizer on Python strings leave it unimported: a user with TensorFlow
    in the same environment pays neither its start-up nor its CUDA pins (issue 28)."""
    out = _python(
        "import sys\n"
        "import keras_bert_zoo as kbz\n"
        "from keras_bert_zoo.cli import commands, parser\n"
        "from keras_bert_zoo.jobs import embed, finetune, finetune_embed, predict, pretrain\n"
        "from keras_bert_zoo.data.pretraining import text\n"
        "preprocessor = kbz.BertPreprocessor.from_preset('bert_tiny_en_uncased', "
        "sequence_length=16)\n"
        "print(preprocessor(['A first text.', 'and a second']) ['token_ids'].shape)\n"
        "print(len(text.expand_input_patterns(sys.executable)))\n"
        "print(sorted(m for m in ('tensorflow', 'tensorflow_text') if m in sys.modules))\n",
        KERAS_BACKEND=backend,
    )
    assert out.splitlines() == ["(2, 16)", "1", "[]"]


def test_public_names_resolve():
    import keras_bert_zoo as kbz

    for name in kbz.__all__:
        assert getattr(kbz, name) is not None, name
    assert kbz.checkpoints.convert and kbz.training.create_optimizer and kbz.layers.MaskedLMHead
