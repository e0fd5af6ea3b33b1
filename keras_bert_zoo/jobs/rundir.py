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
"""

import contextlib
import fcntl
import json
import logging
import os
import shutil
from pathlib import Path

from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.checksums import sha256_file

logger = logging.getLogger(__name__)
MANIFEST = "run.json"
LOCK = ".lock"
# How an attempt runs, not what it computes: may change between attempts of one run.
EXECUTION_SETTINGS = {
    "jit_compile",
    "strategy",
    "tpu",
    "verbose",
    "keep_checkpoints",
    "checkpoint_every_minutes",
    "export",
}
_FULL_HASH_BYTES = 64 << 20  # larger inputs (pretraining corpora) hash their first 64 MiB


def fingerprint(path) -> dict:
    """Size and sha256 of a file (of its first 64 MiB for larger ones, with the size)."""
    path = Path(path)
    return {"size": path.stat().st_size, "sha256": sha256_file(path, limit=_FULL_HASH_BYTES)}


def _differences(stored: dict, current: dict) -> list:
    keys = sorted((set(stored) | set(current)) - EXECUTION_SETTINGS)
    return [
        f"{key}: was {stored.get(key)!r}, now {current.get(key)!r}"
        for key in keys
        if stored.get(key) != current.get(key)
    ]


class RunDirectory(contextlib.AbstractContextManager):
    """`with RunDirectory(output, "finetune", settings, inputs) as run:` then `run.finished`
    (the stored metrics of a complete run, else None) and `run.complete(metrics)`.

    Args:
        output: the run's directory (created if missing).
        command: "finetune" or "pretrain".
        settings: JSON-able values that determine the result (flags, preset, seed...).
        inputs: `{flag: [paths]}` of the input files, fingerprinted.
        overwrite: start afresh, deleting what the directory holds.
    """

    def __init__(self, output, command: str, settings: dict, inputs: dict, overwrite: bool = False):
        self.output = Path(output)
        self.record = {
            "command": command,
            "settings": settings,
            "inputs": {
                flag: {str(p): fingerprint(p) for p in paths} for flag, paths in inputs.items()
            },
        }
        self.overwrite = overwrite
        self.finished = None
        self._lock = None

    def __enter__(self):
        self.output.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.output / LOCK, "a+")  # noqa: SIM115 (held for the whole run)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.seek(0)
            holder = self._lock.read().strip() or "another process"
            self._lock.close()
            raise ValueError(
                f"{self.output} is being written by another kbz run ({holder}). Wait for it "
                "to finish, or choose another --output."
            ) from None
        try:
            self._lock.seek(0)
            self._lock.truncate()
            self._lock.write(f"pid {os.getpid()}")
            self._lock.flush()
            if self.overwrite:
                self._clear()
            self._check_manifest()
        except BaseException:
            self.__exit__()  # `with` calls __exit__ only once __enter__ has returned
            raise
        return self

    def _clear(self):
        for path in self.output.iterdir():
            if path.name != LOCK:
                shutil.rmtree(path) if path.is_dir() else path.unlink()

    def _check_manifest(self):
        manifest = self.output / MANIFEST
        others = [p.name for p in self.output.iterdir() if p.name not in (LOCK, MANIFEST)]
        if not manifest.is_file():
            if others:
                raise ValueError(
                    f"--output {self.output} already holds files ({', '.join(sorted(others)[:5])}"
                    ") but no kbz run record. Choose another --output, or pass --overwrite "
                    "to replace its contents."
                )
            write_json(manifest, {**self.record, "status": "running"})
            return
        stored = json.loads(manifest.read_text())
        problems = []
        if stored.get("command") != self.record["command"]:
            problems.append(f"command: was {stored.get('command')}, now {self.record['command']}")
        problems += _differences(stored.get("settings", {}), self.record["settings"])
        for flag in sorted(set(stored.get("inputs", {})) | set(self.record["inputs"])):
            if stored.get("inputs", {}).get(flag) != self.record["inputs"].get(flag):
                problems.append(f"{flag}: the input file(s) changed (or other files were given)")
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

    def complete(self, metrics: dict) -> None:
        """Records the run as complete with its metrics; its checkpoints are no longer needed."""
        write_json(
            self.output / MANIFEST, {**self.record, "status": "complete", "metrics": metrics}
        )
        shutil.rmtree(self.output / "checkpoints", ignore_errors=True)

    def __exit__(self, *exc_info):
        if self._lock is not None and not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
        return False
