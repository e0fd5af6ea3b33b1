"""Every code block of README.md and docs/*.md runs, so the docs cannot drift from the code.

The conventions (docs/testing.md says them for authors):
- A page's blocks run in order, in one fresh working directory that holds a link to the
  repository's `examples/`, `tests/`, `tools/` and `benchmarks/` (the docs' paths are
  relative to a clone's root); its `python`
  blocks share one namespace, as a reader's session would.
- ```python blocks are executed. ```bash blocks hold commands, one per line (lines joined at a
  trailing backslash, `#` comments dropped): `kbz ...` runs in this process through
  `keras_bert_zoo.cli.main` and must return 0 (`--help` exits 0); `python ...` runs in a
  subprocess. Any other command is an error: say it in another way or mark the block.
- ```bash no-test: REASON``` (or ```python no-test: REASON```) is not run; the reason is
  required. For what cannot run here: a GPU, a container, a network download, an install.
- ```bash e2e``` / ```python e2e``` blocks (real fine-tuning, example scripts) run only in the
  end-to-end tier (`make test-e2e`), with the page's other blocks before them.
- ```text blocks are output samples or layouts, never run.

Tiny settings replace big ones only through the three tables below, visibly: preset names
become a tiny random preset built here, bundled data files become their small heads, and each
command gets the flags of `TINY_FLAGS` appended (argparse takes a repeated flag's last value).
Downloads are impossible here (an empty weights cache and mirror), so a name missing from
`PRESETS` fails instead of reaching the network.
"""

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import save_tiny_preset

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```([^\n`]*)\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
RUN = {"python", "bash"}
NOT_RUN = {"text"}
DATA = ROOT / "tests" / "data"

# Preset names the docs use -> the tiny random preset (1 layer, the real uncased vocabulary).
PRESETS = ("bert_tiny_en_uncased", "bert_base_en_uncased", "all_minilm_l6_v2")
# Bundled files -> small heads of the same kind.
FILES = {
    "examples/data/sst2_sample.tsv": DATA / "finetune" / "sst2_train_head.tsv",
    "examples/data/sst2_heldout.tsv": DATA / "finetune" / "sst2_train_head.tsv",
    "examples/data/wnut17_train_sample.conll": DATA / "finetune" / "wnut17_train_head.conll",
    "examples/data/wnut17_dev_sample.conll": DATA / "finetune" / "wnut17_dev_head.conll",
    "examples/data/squad_train_sample.json": DATA / "finetune" / "squad_v1.1_sample.json",
    "examples/data/squad_heldout_sample.json": DATA / "finetune" / "squad_v1.1_sample.json",
    "examples/data/pretraining/*.txt": DATA / "pretraining" / "sentences.txt",
    "examples/data/pretraining/gutenberg.txt": DATA / "pretraining" / "sentences.txt",
}
# Flags appended to each command (first words of its argument list) for tiny runs.
TINY_FLAGS = {  # the first matching prefix wins
    ("finetune", "qa"): (
        "--epochs 1 --sequence-length 64 --max-query-length 16 --doc-stride 16"
        " --no-jit-compile --no-export"
    ).split(),
    ("finetune", "embed"): (
        "--epochs 1 --sequence-length 32 --batch-size 2 --no-jit-compile --no-export"
    ).split(),
    ("finetune",): "--epochs 1 --sequence-length 32 --no-jit-compile --no-export".split(),
    ("pretrain",): (
        "--num-train-steps 4 --checkpoint-every 2 --batch-size 4 --max-seq-length 32"
        " --max-predictions-per-seq 5 --no-jit-compile"
    ).split(),
}


def blocks(page: Path) -> list[tuple[str, set[str], str, int]]:
    """(language, markers, code, line) of each fenced block of `page`."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        info = match.group(1).strip()
        language, _, rest = info.partition(" ")
        markers = {word.rstrip(":") for word in rest.split()[:1]}
        line = text.count("\n", 0, match.start()) + 1
        found.append((language, markers, textwrap.dedent(match.group(2)), line))
    return found


def test_every_block_declares_how_it_is_tested():
    """A block is run, or says why not: no bare fence, no unknown language, no silent skip."""
    problems = []
    for page in PAGES:
        for language, markers, _code, line in blocks(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            info = page.read_text().splitlines()[line - 1].strip()
            if language in NOT_RUN:
                continue
            if language not in RUN:
                problems.append(f"{where}: language {language!r}: use python, bash or text")
            elif "no-test" in markers and not re.search(r"no-test:\s*\S", info):
                problems.append(f"{where}: `no-test` needs a reason (no-test: REASON)")
    assert not problems, "\n".join(problems)


def _commands(code: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", code)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(words)
    return commands


def _substitute_word(word: str, tiny_preset: Path) -> str:
    flag, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
    if value in PRESETS:
        value = str(tiny_preset)
    elif value in FILES:
        value = str(FILES[value])
    return f"{flag}{equals}{value}"


def _tiny_flags(argv: list[str]) -> list[str]:
    for prefix, flags in TINY_FLAGS.items():
        if tuple(argv[: len(prefix)]) == prefix and "--help" not in argv:
            return flags
    return []


def _run_kbz(argv: list[str], where: str) -> None:
    from keras_bert_zoo.cli import main  # noqa: PLC0415

    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's --help
        status = exit_.code or 0
    assert status == 0, f"{where}: kbz {shlex.join(argv)} exited {status}"


def _run_bash(code: str, where: str, tiny_preset: Path) -> None:
    for words in _commands(code):
        words = [_substitute_word(word, tiny_preset) for word in words]
        program, argv = words[0], words[1:]
        if program == "kbz":
            _run_kbz(argv + _tiny_flags(argv), where)
        elif program == "python":
            done = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
            assert done.returncode == 0, f"{where}: {shlex.join(words)}\n{done.stderr[-3000:]}"
        else:
            pytest.fail(f"{where}: {program!r} is neither kbz nor python: mark the block no-test")


def _python_source(code: str, tiny_preset: Path) -> str:
    for name in PRESETS:
        code = code.replace(f'"{name}"', repr(str(tiny_preset)))
    for path, small in FILES.items():
        code = code.replace(f'"{path}"', repr(str(small)))
    return code


def _cases():
    for page in PAGES:
        kinds = [markers for language, markers, _, _ in blocks(page) if language in RUN]
        if not any("no-test" not in markers for markers in kinds):
            continue
        name = str(page.relative_to(ROOT))
        yield pytest.param(page, False, id=name)
        if any("e2e" in markers for markers in kinds):
            yield pytest.param(page, True, id=f"{name}-e2e", marks=pytest.mark.e2e)


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    return save_tiny_preset(tmp_path_factory.mktemp("docs") / "tiny_preset")


@pytest.mark.parametrize(("page", "with_e2e"), list(_cases()))
def test_code_blocks_run(page, with_e2e, tiny_preset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for folder in ("examples", "tests", "tools", "benchmarks"):  # paths as from a clone's root
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.setenv("KBZ_CACHE_DIR", str(tmp_path / ".cache"))  # nothing downloaded here
    monkeypatch.setenv("KBZ_WEIGHTS_MIRROR", str(tmp_path / ".no-mirror"))
    monkeypatch.setenv("KBZ_COMPILE_CACHE", "off")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    namespace = {"__name__": "__docs__"}
    for language, markers, code, line in blocks(page):
        where = f"{page.relative_to(ROOT)}:{line}"
        if language not in RUN or "no-test" in markers or ("e2e" in markers and not with_e2e):
            continue
        if language == "python":
            source = _python_source(code, tiny_preset)
            exec(compile(source, where, "exec"), namespace)  # noqa: S102 (the docs' own code)
        else:
            _run_bash(code, where, tiny_preset)
