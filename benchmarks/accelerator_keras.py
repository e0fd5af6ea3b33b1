"""The Keras-on-JAX half of `benchmarks/accelerator.py` (run by it in a child process).

Runs the plan's jobs in order until its deadline: the correctness check against the CPU
fixture, MLM + NSP pretraining steps, classifier fine-tuning steps and inference, each through
`model.fit` / `model.predict` with XLA, as users train. TensorFlow imports are blocked before
anything else is imported: the GPU image has no TensorFlow, so neither may this path.
"""

import gc
import sys
import time

import numpy as np


class NoTensorFlow:
    """A meta-path finder that fails `import tensorflow` as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ImportError(f"No module named {name!r} (blocked: the GPU image has none)")


sys.meta_path.insert(0, NoTensorFlow())

import jax  # noqa: E402
import keras  # noqa: E402
from accelerator_common import (  # noqa: E402
    is_out_of_memory,
    pretraining_batch,
    reference_inputs,
    run_jobs,
    seeded_values,
)
from flops import classifier_flops, gpu_peak_tflops, pretraining_flops  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.pretraining import compile_pretrainer  # noqa: E402
from keras_bert_zoo.tasks import classifier_loss  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

PRECISION = "mixed_bfloat16"


def device_name() -> str:
    device = jax.devices()[0]
    return f"{device.platform}: {device.device_kind}"


def peak_tflops():
    device = jax.devices()[0]
    return gpu_peak_tflops(device.device_kind) if device.platform == "gpu" else None


class EpochTimer(keras.callbacks.Callback):
    """Wall time of each epoch, waiting for the device at its end (JAX dispatches async)."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        jax.block_until_ready([variable.value for variable in self.model.trainable_variables])
        self.seconds.append(time.perf_counter() - self.start)


def repeated(batch):
    while True:
        yield batch


def timed_fit(model, batch, job):
    """(seconds of the first fit: compile + warm-up steps, best seconds per timed step, loss)."""
    start = time.perf_counter()
    model.fit(repeated(batch), steps_per_epoch=job["warmup_steps"], epochs=1, verbose=0)
    first = time.perf_counter() - start
    timer = EpochTimer()
    history = model.fit(
        repeated(batch),
        steps_per_epoch=job["steps"],
        epochs=job["repeats"],
        verbose=0,
        callbacks=[timer],
    )
    return first, min(timer.seconds) / job["steps"], float(history.history["loss"][-1])


def throughput_row(job, batch, first, step_seconds, flops_per_sequence, loss=None):
    peak = peak_tflops()
    tflops = flops_per_sequence * batch / step_seconds / 1e12
    return {
        "batch": batch,
        "sequences_per_second": batch / step_seconds,
        "tflops": tflops,
        "mfu": tflops / peak if peak else None,
        "first_seconds": first,
        "loss": loss,
        "finite": loss is None or bool(np.isfinite(loss)),
    }


def pretrainer(architecture, predictions, dtype=PRECISION):
    encoder = kbz.build_encoder(**architecture, dtype=dtype)
    return kbz.build_pretrainer(encoder, max_predictions=predictions)


def largest_batch(job, measure):
    """`measure(batch)` for the first of `job["batches"]` that fits in device memory."""
    notes = []
    for batch in job["batches"]:
        try:
            row = measure(batch)
            row["note"] = "; ".join(notes)
            return row
        except Exception as error:  # noqa: BLE001 (only running out of memory is retried)
            if not is_out_of_memory(error):
                raise
            notes.append(f"batch {batch} did not fit")
            keras.backend.clear_session()
            gc.collect()
    raise RuntimeError("; ".join(notes))


def pretrain(job):
    architecture, length, predictions = job["architecture"], job["length"], job["predictions"]

    def measure(batch):
        keras.utils.set_random_seed(0)
        model = pretrainer(architecture, predictions)
        compile_pretrainer(model, create_optimizer(1e-4, total_steps=10**6), jit_compile=True)
        data = pretraining_batch(batch, length, predictions, architecture["vocabulary_size"])
        first, seconds, loss = timed_fit(model, data, job)
        flops = pretraining_flops(architecture, length, predictions)
        return throughput_row(job, batch, first, seconds, flops, loss)

    return largest_batch(job, measure)


def classifier(architecture, fused_attention=None):
    encoder = kbz.build_encoder(**architecture, dtype=PRECISION)
    model = kbz.build_classifier(encoder, num_classes=2)
    if fused_attention is not None:  # before the first trace, as the switch requires
        kbz.encoder.set_attention(model, "fused" if fused_attention else "explicit")
    model.compile(
        optimizer=create_optimizer(2e-5, total_steps=10**6),
        loss=classifier_loss(2),
        jit_compile=True,
    )
    return model


def classifier_inputs(batch, length, vocabulary_size):
    x, _, _ = pretraining_batch(batch, length, 1, vocabulary_size)
    x.pop("mask_positions")
    return x


def finetune(job):
    architecture, length = job["architecture"], job["length"]

    def measure(batch):
        keras.utils.set_random_seed(0)
        model = classifier(architecture, job.get("fused_attention"))
        x = classifier_inputs(batch, length, architecture["vocabulary_size"])
        labels = np.arange(batch, dtype="int32") % 2
        first, seconds, loss = timed_fit(model, (x, labels), job)
        return throughput_row(
            job, batch, first, seconds, classifier_flops(architecture, length), loss
        )

    return largest_batch(job, measure)


def inference(job):
    architecture, length = job["architecture"], job["length"]

    def measure(batch):
        keras.utils.set_random_seed(0)
        model = classifier(architecture, job.get("fused_attention"))
        x = classifier_inputs(batch, length, architecture["vocabulary_size"])
        x = {key: np.tile(value, (job["steps"], 1)) for key, value in x.items()}
        start = time.perf_counter()
        model.predict(x, batch_size=batch, verbose=0)  # compiles, then runs every batch once
        first = time.perf_counter() - start
        best = float("inf")
        for _ in range(job["repeats"]):
            start = time.perf_counter()
            logits = model.predict(x, batch_size=batch, verbose=0)  # numpy: waits for the device
            best = min(best, time.perf_counter() - start)
        row = throughput_row(
            job, batch, first, best / job["steps"], classifier_flops(architecture, length) / 3
        )
        row["finite"] = bool(np.isfinite(logits).all())
        return row

    return largest_batch(job, measure)


def seeded_pretrainer(architecture, predictions, seed, dtype):
    """bert_tiny's pretrainer with every float weight drawn by numpy from `seed`."""
    keras.utils.set_random_seed(seed)  # the dropout layers' seed state (dropout is 0 here)
    model = pretrainer(architecture, predictions, dtype=dtype)
    values = seeded_values([(v.path, tuple(v.shape), v.dtype) for v in model.weights], seed)
    for variable in model.weights:
        if variable.path in values:
            variable.assign(values[variable.path])
    return model


def one_step(job, dtype, steps=1):
    """Outputs before a training step, the step's losses, and outputs after `steps` steps."""
    x, y, w = reference_inputs(job)
    model = seeded_pretrainer(job["architecture"], job["predictions"], job["seed"], dtype)
    # no warmup: the schedule's first rate is the peak, so the step moves every weight
    optimizer = create_optimizer(1e-3, total_steps=100, warmup_fraction=0.0)
    compile_pretrainer(model, optimizer, jit_compile=True)
    before = model.predict_on_batch(x)
    logs = [model.train_on_batch(x, y, w, return_dict=True) for _ in range(steps)]
    after = model.predict_on_batch(x)
    return before, logs, after


def outputs_to_record(before, logs, after, stride):
    arrays = {}
    for when, outputs in (("before", before), ("after", after)):
        mlm = np.asarray(outputs["mlm_logits"], "float64")
        arrays[f"{when}_nsp_logits"] = np.asarray(outputs["nsp_logits"], "float64")
        arrays[f"{when}_mlm_logits"] = mlm[:, :, ::stride]
        peak = mlm.max(-1, keepdims=True)
        arrays[f"{when}_mlm_logsumexp"] = (
            peak + np.log(np.exp(mlm - peak).sum(-1, keepdims=True))
        )[..., 0]
    arrays["step_losses"] = np.array(
        [logs[0]["loss"], logs[0]["mlm_logits_loss"], logs[0]["nsp_logits_loss"]]
    )
    return arrays


def correctness(job):
    """float32 at the highest matmul precision against the CPU fixture; bf16 stays finite."""
    with jax.default_matmul_precision("highest"):
        before, logs, after = one_step(job, "float32")
    got = outputs_to_record(before, logs, after, job["vocabulary_stride"])
    if job["record"]:
        np.savez_compressed(job["reference"], **got)
        return {"recorded": job["reference"], "keys": sorted(got)}
    reference = np.load(job["reference"])
    tolerance = job["tolerance"]
    errors = {
        key: float(np.max(np.abs(got[key] - reference[key]) / (1.0 + np.abs(reference[key]))))
        for key in reference.files
    }
    before16, logs16, after16 = one_step(job, PRECISION, steps=job["bf16_steps"])
    losses16 = [log["loss"] for log in logs16]
    finite16 = bool(
        np.isfinite(losses16).all()
        and all(np.isfinite(np.asarray(v)).all() for v in (*before16.values(), *after16.values()))
    )
    return {
        "max_error": max(errors.values()),
        "worst": max(errors, key=errors.get),
        "tolerance": tolerance,
        "passed": max(errors.values()) <= tolerance,
        "bf16_losses": [float(loss) for loss in losses16],
        "bf16_loss_vs_float32": float(losses16[0] - reference["step_losses"][0]),
        "bf16_finite": finite16,
    }


RUNNERS = {
    "correctness": correctness,
    "pretrain": pretrain,
    "finetune": finetune,
    "inference": inference,
}


def main(plan, results_path, deadline):
    environment = {
        "impl": "Keras/JAX",
        "device": device_name(),
        "versions": f"jax {jax.__version__}, keras {keras.__version__}",
        "tensorflow_blocked": any(isinstance(f, NoTensorFlow) for f in sys.meta_path),
    }
    run_jobs(plan, RUNNERS, results_path, deadline, environment, keras.backend.clear_session)


if __name__ == "__main__":
    main(*sys.argv[1:])
