"""The output directory of a training run: one writer at a time, resumed only by the same run.

`RunDirectory` wraps the work of `run_finetune` / `run_pretrain`:
- an exclusive lock (`flock` on `<output>/.lock`, released by the kernel when the process
  ends, even by `kill -9`): a second run writing the same directory stops at once;
- `run.json` records what the run computes (its settings and a fingerprint of each input
  file) and its status. The same command again resumes an unfinished run, or returns the
  stored metrics of a finished one ("already complete"); anything else is an error listing
  each difference and the fix (`--overwrite`, or another `--output`), never a silent reuse.
Settings that change how a run executes but not what it computes (XLA, the strategy, how
many checkpoints to keep) may differ between attempts.

Nothing is lost to a failed start: an attempt that ends (an error, Ctrl-C) before its first
checkpoint removes what it wrote, and one that was killed before it (no checkpoint, so
nothing to resume) is replaced by the next run in that directory, without `--overwrite`.
Which files are the run's is `saving.ownership`'s rule: a complete run's `run.json` lists
every file it wrote (`files`); an unfinished run (killed, or written by an older version)
owns only what matches `RUN_LAYOUT`. `--overwrite` removes exactly those files and refuses,
naming them, if any other file is anywhere below `--output`; other files at the top of
`--output` may stay beside a run, but none below `preset/` or `export/`, which the run
replaces whole at its end (refused before any work). The lock file goes when the run ends.
"""

import contextlib
import fcntl
import json
import logging
import os
from pathlib import Path

from keras_bert_zoo.choices import PREDICTION_FILES
from keras_bert_zoo.console import status
from keras_bert_zoo.presets.sources import RUN_MANIFEST
from keras_bert_zoo.saving import ownership
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.checksums import sha256_file
from keras_bert_zoo.training.checkpoint_files import STATE_FILE

logger = logging.getLogger(__name__)
MANIFEST = RUN_MANIFEST
LOCK = ".lock"
NBEST_FILE = "nbest_predictions.json"  # `finetuning.prediction_files`
_TOP_FILES = (
    MANIFEST, LOCK, "metrics.json", "model.keras", "adapter.safetensors", NBEST_FILE,
    *PREDICTION_FILES.values(),
    *(f"{Path(f).stem}.ranked.tsv" for f in PREDICTION_FILES.values() if f.endswith(".tsv")),
)  # fmt: skip
# What a run writes, at any moment of its life (`saving.ownership`: the rule where a run has
# not recorded its files yet). Checkpoint names: `training.checkpoint_files`, `jobs.validation`.
RUN_LAYOUT = (
    ownership.Layout(_TOP_FILES)
    + ownership.Layout(
        (
            "checkpoints/",
            "checkpoints/state.json",
            "checkpoints/ckpt-*.weights.h5",
            "checkpoints/ckpt-*.seeds.npz",
            "checkpoints/validation.json",
            "checkpoints/best.weights.h5",
            "checkpoints/best.lora.npz",
            "checkpoints/.ckpt-*",
            "checkpoints/.state.json.*",
            "checkpoints/.validation.json.*",
            "checkpoints/.best.*",
            "logs/",
            "logs/train/",
            "logs/validation/",
            "logs/train/events.out.tfevents.*",
            "logs/validation/events.out.tfevents.*",
            "export/",
            "export/.1.*",
            "export/.1.*/**",
        )
    )  # fmt: skip
    + ownership.PRESET.below("preset")
    + ownership.SAVED_MODEL.below("export/1")
    + ownership.staging_leftovers((*_TOP_FILES, "preset"))
)
_REPLACED_WHOLE = ("preset/", "export/")  # written by `staged_directory` at the run's end
_FULL_HASH_BYTES = 64 << 20  # larger inputs (pretraining corpora) hash their first 64 MiB


def fingerprint(path) -> dict:
    """Size and sha256 of a file (of its first 64 MiB for larger ones, with the size)."""
    path = Path(path)
    return {"size": path.stat().st_size, "sha256": sha256_file(path, limit=_FULL_HASH_BYTES)}


def _differences(stored: dict, current: dict, execution: set, defaults: dict) -> list:
    """Each setting that differs. A setting the record lacks was added to the config after
    the run started; its default is what the run used then (a new setting's default keeps
    the earlier behaviour), so the run resumes unless this attempt asks for another value."""
    stored = {**{k: v for k, v in defaults.items() if k in current}, **stored}
    keys = sorted((set(stored) | set(current)) - execution)
    return [
        f"{key}: was {stored.get(key)!r}, now {current.get(key)!r}"
        for key in keys
        if stored.get(key) != current.get(key)
    ]


def _recorded(output: Path):
    """The files a complete run's record lists, else None (`RUN_LAYOUT` decides)."""
    try:
        stored = json.loads((output / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    files = stored.get("files") if isinstance(stored, dict) else None
    if stored.get("status") != "complete" or not isinstance(files, list):
        return None
    return {*files, MANIFEST, LOCK}


def foreign_run_files(output) -> list:
    """The files below a run's `output` that no kbz run wrote (`saving.ownership`'s rule)."""
    return ownership.foreign_files(Path(output), _recorded(Path(output)), RUN_LAYOUT)


def refuse_foreign(output, foreign: list, consequence: str) -> None:
    if foreign:
        raise ValueError(
            f"--output {output} holds files no kbz run wrote ({ownership.describe(foreign)}); "
            f"{consequence}. Move them elsewhere, or choose another --output."
        )


def check_overwrite(output, overwrite: bool) -> None:
    """What `RunDirectory(..., overwrite=True)` refuses, checked before any work."""
    if overwrite:
        refuse_foreign(output, foreign_run_files(output), "--overwrite would delete them")


class RunDirectory(contextlib.AbstractContextManager):
    """`with RunDirectory(output, "finetune", settings, inputs) as run:` then `run.finished`
    (the stored metrics of a complete run, else None) and `run.complete(metrics)`.

    Args:
        output: the run's directory (created if missing).
        command: "finetune" or "pretrain".
        settings: the run's config (`jobs.config`: it records `settings()`, and a re-run
            must match its `identity()`), or JSON-able values that all determine the result.
        inputs: `{flag: [paths]}` of the input files, fingerprinted.
        overwrite: start afresh, deleting what an earlier run wrote there (a directory
            holding other files is refused: they are named).
    """

    def __init__(self, output, command: str, settings, inputs: dict, overwrite: bool = False):
        self.output = Path(output)
        self._defaults = {}
        if hasattr(settings, "identity"):  # a run config (`jobs.config`)
            recorded, identity = settings.settings(), settings.identity()
            self._defaults = settings.defaults()
        else:
            recorded = identity = settings
        # How an attempt runs, not what it computes: may change between attempts of one run.
        self._execution = set(recorded) - set(identity)
        self.record = {
            "command": command,
            "settings": recorded,
            "inputs": {
                flag: {str(p): fingerprint(p) for p in paths} for flag, paths in inputs.items()
            },
        }
        self.overwrite = overwrite
        self.finished = None
        self._lock = None
        self._created = False  # the directory did not exist before this attempt
        self._fresh = False  # this attempt starts at step 0 (nothing to resume)

    def __enter__(self):
        self._created = not self.output.exists()
        self._root = next(  # the outermost folder this attempt creates
            (p for p in reversed((self.output, *self.output.parents)) if not p.exists()),
            self.output,
        )
        self.output.mkdir(parents=True, exist_ok=True)
        self._lock = self._acquire()
        try:
            if self.overwrite:
                self._refuse_foreign(self._foreign(), "--overwrite would delete them")
                self._clear()
            self._check_manifest()
            if self.finished is None:
                replaced = [f for f in self._foreign() if f.startswith(_REPLACED_WHOLE)]
                self._refuse_foreign(replaced, "the run replaces preset/ and export/ at its end")
        except BaseException:
            self._release()  # `with` calls __exit__ only once __enter__ has returned
            raise
        return self

    def _acquire(self):
        """The locked `.lock` file, checked to be the one in the directory (a finishing run
        removes it while holding it: a file opened just before that is locked in vain)."""
        path = self.output / LOCK
        while True:
            handle = open(path, "a+")  # noqa: SIM115 (held for the whole run)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                raise ValueError(
                    f"{self.output} is being written by another kbz run ({holder}). Wait for "
                    "it to finish, or choose another --output."
                ) from None
            try:
                same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                handle.seek(0)
                handle.truncate()
                handle.write(f"pid {os.getpid()}")
                handle.flush()
                return handle
            handle.close()

    def _foreign(self) -> list:
        return foreign_run_files(self.output)

    def _refuse_foreign(self, foreign: list, consequence: str) -> None:
        refuse_foreign(self.output, foreign, consequence)

    def _clear(self):
        ownership.remove_owned(self.output, _recorded(self.output), RUN_LAYOUT, keep=(LOCK,))

    def _has_checkpoint(self) -> bool:
        return (self.output / "checkpoints" / STATE_FILE).is_file()

    def _start(self):
        write_json(self.output / MANIFEST, {**self.record, "status": "running"})
        self._fresh = True

    def _check_manifest(self):
        manifest = self.output / MANIFEST
        others = [p.name for p in self.output.iterdir() if p.name not in (LOCK, MANIFEST)]
        if not manifest.is_file():
            if others:
                fix = "" if self._foreign() else " or pass --overwrite to replace them"
                raise ValueError(
                    f"--output {self.output} already holds files ({', '.join(sorted(others)[:5])}"
                    f") but no kbz run record. Choose another --output{fix}."
                )
            return self._start()
        stored = json.loads(manifest.read_text())
        problems = []
        if stored.get("command") != self.record["command"]:
            problems.append(f"command: was {stored.get('command')}, now {self.record['command']}")
        stored_settings = stored.get("settings", {})
        problems += _differences(
            stored_settings, self.record["settings"], self._execution, self._defaults
        )
        for flag in sorted(set(stored.get("inputs", {})) | set(self.record["inputs"])):
            if stored.get("inputs", {}).get(flag) != self.record["inputs"].get(flag):
                problems.append(f"{flag}: the input file(s) changed (or other files were given)")
        if stored.get("status") == "running" and not self._has_checkpoint():
            return self._restart(problems)
        if problems:
            raise ValueError(
                f"--output {self.output} holds another run ({stored.get('status')}); it differs "
                "in " + "; ".join(problems) + ". Pass --overwrite to start this run afresh "
                "there, or choose another --output."
            )
        if stored.get("status") == "complete":
            self.finished = stored.get("metrics", {})
            logger.warning(
                "%s: this run is already complete; returning its stored metrics "
                "(pass --overwrite to run it again).",
                self.output,
            )

    def _restart(self, problems: list) -> None:
        """An earlier attempt that ended before its first checkpoint: nothing to resume."""
        self._clear()
        if problems:
            status.info(
                "%s held a run that stopped before its first checkpoint (it differed in %s); "
                "replaced by this one.",
                self.output,
                "; ".join(problems),
            )
        else:
            status.info(
                "%s: the earlier attempt of this run stopped before its first checkpoint; "
                "starting over from step 0.",
                self.output,
            )
        self._start()

    def complete(self, metrics: dict) -> None:
        """Records the run as complete with its metrics; its checkpoints are no longer needed."""
        # Its checkpoints are no longer needed (only the run's own files below checkpoints/).
        ownership.remove_owned(self.output, None, RUN_LAYOUT, keep=(LOCK,), below="checkpoints/")
        foreign = set(self._foreign())
        files = [f for f in ownership.leaves(self.output) if f not in foreign and f != LOCK]
        record = {**self.record, "status": "complete", "metrics": metrics}
        write_json(self.output / MANIFEST, {**record, "files": sorted({*files, MANIFEST})})
        self._fresh = False

    def __exit__(self, exc_type=None, *exc_info):
        failed_start = exc_type is not None and self._fresh and not self._has_checkpoint()
        if failed_start:
            self._clear()  # nothing to resume: nothing is left behind
        self._release()
        if failed_start and self._created:
            for folder in (self.output, *self.output.parents):  # the folders this run made
                if folder == self._root.parent or any(folder.iterdir()):
                    break
                folder.rmdir()
        return False

    def _release(self) -> None:
        if self._lock is not None and not self._lock.closed:
            (self.output / LOCK).unlink(missing_ok=True)  # while still held: see `_acquire`
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
