"""The run directory of a run over several processes (`--strategy data-parallel` on JAX).

Process 0 holds the `RunDirectory` (lock, run record, results) and writes `--output`. The
other processes run the same code (Keras' saving of replicated JAX arrays talks to every
process, so they must save too) into a scratch copy of `--output` made when the run opens
(its checkpoints, to resume from the same step: `--output` must be one directory for all
processes, e.g. on a shared filesystem) and deleted when it ends, as tf.distribute's
multi-worker workers do. They learn from process 0 whether it could open the directory and
whether the run is already complete, and wait for its outputs at the end. In a run of one
process, `ProcessRun` is its `RunDirectory`.
"""

import contextlib
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from keras_bert_zoo.jobs.rundir import MANIFEST, RunDirectory
from keras_bert_zoo.training.processes import barrier, broadcast, is_chief, same_everywhere

FAILED, RUNNING, FINISHED = -1, 0, 1  # what process 0 tells the others after opening the run


def _fingerprint(record: dict) -> int:
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return int(digest[:7], 16)  # fits the int32 that the processes compare


class ProcessRun(contextlib.AbstractContextManager):
    """`with ProcessRun("finetune", config, inputs) as run:` then `run.output` (where this
    process writes), `run.finished`, `run.chief` (process 0) and `run.complete(metrics)`.

    `command` names the job in the run record; `config` is its run settings (`config.output`,
    `config.overwrite`, `config.identity()`); `inputs` maps a flag to its files.
    """

    def __init__(self, command: str, config, inputs: dict):
        self.run = RunDirectory(config.output, command, config, inputs, config.overwrite)
        self.chief, self.finished, self.output = is_chief(), None, self.run.output

    def __enter__(self):
        if self.chief:
            try:
                self.run.__enter__()
            except BaseException:
                broadcast(FAILED)  # the others stop too, instead of waiting for process 0
                raise
            self.finished = self.run.finished
        status = broadcast(RUNNING if self.finished is None else FINISHED)
        if status == FAILED:
            raise ValueError(
                f"Process 0 could not open --output {self.run.output} (its error says why); "
                "this process stops with it."
            )
        if not same_everywhere(_fingerprint(self.run.record)):
            self.__exit__()
            raise ValueError(
                "The processes of this --strategy data-parallel run were started with different "
                "settings or input files. Start every process with the same command."
            )
        if status == FINISHED and not self.chief:
            manifest = self.run.output / MANIFEST
            stored = json.loads(manifest.read_text()) if manifest.is_file() else {}
            self.finished = stored.get("metrics", {})
        if not self.chief:
            self.output = Path(tempfile.mkdtemp(prefix="kbz-process-"))
            checkpoints = self.run.output / "checkpoints"
            if checkpoints.is_dir():  # process 0 only removes its stale `.ckpt-*` meanwhile
                ignore = shutil.ignore_patterns(".ckpt-*")
                shutil.copytree(checkpoints, self.output / "checkpoints", ignore=ignore)
        return self

    def complete(self, metrics: dict) -> None:
        """Process 0 records the run as complete; every process then waits for that."""
        if self.chief:
            self.run.complete(metrics)
        barrier("kbz run complete")  # the outputs are all written once process 0 is here

    def __exit__(self, *exc_info):
        if not self.chief and self.output != self.run.output:
            shutil.rmtree(self.output, ignore_errors=True)
        return self.run.__exit__(*exc_info) if self.chief else False
