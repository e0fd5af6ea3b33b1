"""`load_runner`: a task model in the runtime and precision asked for, exported once.

What each run checks before any work (`check_runtime`): the flags' values, the runtime's
optional packages (naming the extra that installs them), and, when no export is cached yet,
what exporting needs (the `onnx` extra and Keras on TensorFlow: tf2onnx converts the
TensorFlow graph; on another backend `ExportNeedsTensorFlow`, on which the `kbz` command line
runs itself again on TensorFlow, before anything is written). Every exported runtime starts
from the same float32 ONNX file (`export.onnx.export_onnx`), kept in the cache
(`runtimes.cache`) with what derives from it.
"""

import hashlib
import importlib.util
import json
import logging
import shutil
import weakref

import keras
import numpy as np

from keras_bert_zoo.export.quantization import quantize_keras, quantize_onnx
from keras_bert_zoo.extras import (
    TENSORFLOW_EXTRA,
    ExportNeedsTensorFlow,
    MissingExtraError,
    backend_installed,
)
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.sources import model_source
from keras_bert_zoo.runtimes import PRECISIONS, RUNTIMES, cache, quality
from keras_bert_zoo.runtimes.runners import EXPORT_CONFIG, OnnxRunner, OpenVinoRunner
from keras_bert_zoo.training import bucketed_prediction
from keras_bert_zoo.training.batching import real_lengths

logger = logging.getLogger(__name__)
_PACKAGES = {  # runtime -> (extra, packages it needs at run time, and for int8)
    "onnx": ("onnx", ["onnxruntime"], []),
    "openvino": ("openvino", ["openvino"], ["nncf"]),
}
_EXPORT_PACKAGES = ["onnx", "onnxruntime", "tf2onnx"]


def check_runtime(runtime: str, precision: str, model=None, task=None, task_kwargs=None):
    """Raises a ValueError for an unknown `--runtime` / `--precision`, a `MissingExtraError`
    naming the extra for a missing package, and (given `model`, a preset, run directory or
    Keras model, and `task`) says whether the export that is not cached yet can be made here."""
    key = None if model is None or runtime == "keras" else _key(model, task, task_kwargs)
    _check(runtime, precision, key)


def check_model_runtime(runtime: str, precision: str) -> None:
    """`check_runtime` for a Keras model in memory, which runs int8 only when exported."""
    _check(runtime, precision, None)
    if runtime == "keras" and precision != "float32":
        raise ValueError(
            "A Keras model in memory runs as it is in float32: for int8 in Keras call "
            "model.quantize('int8') (Keras' own), or pass runtime='onnx' or 'openvino' with "
            f"precision='int8'. Received: precision={precision!r}."
        )


_RUNNERS = weakref.WeakKeyDictionary()  # Keras model -> (its fingerprint, its runner)


def model_runner(model, task: str, runtime: str, precision: str, sample: dict):
    """The runner of a Keras `model` in memory: the model itself for `keras`, else the
    export of its current weights, reused while they stay (`cache.model_fingerprint`)."""
    if runtime == "keras":
        return model
    key = cache.model_fingerprint(model, task)
    known = _RUNNERS.get(model)
    if known is None or known[0] != (key, runtime, precision):
        runner = load_runner(model, task, runtime, precision, sample=sample)
        _RUNNERS[model] = known = ((key, runtime, precision), runner)
    return known[1]


def _check(runtime: str, precision: str, key: str | None) -> None:
    if runtime not in RUNTIMES:
        raise ValueError(f"--runtime must be one of {', '.join(RUNTIMES)}. Received: {runtime!r}")
    if precision not in PRECISIONS:
        raise ValueError(
            f"--precision must be one of {', '.join(PRECISIONS)}. Received: {precision!r}"
        )
    if runtime == "keras":
        return
    extra, packages, int8_packages = _PACKAGES[runtime]
    _require(packages + (int8_packages if precision == "int8" else []), runtime, extra)
    if key is None or not _needs_export(key, runtime, precision):
        return
    _require(_EXPORT_PACKAGES, runtime, "onnx", " to export the model once")
    if keras.backend.backend() != "tensorflow":
        if not backend_installed("tensorflow"):
            raise MissingExtraError(
                f"--runtime {runtime} exports the model to ONNX once, and tf2onnx converts "
                f"its TensorFlow graph (TensorFlow is not installed): {TENSORFLOW_EXTRA}. "
                "Later runs reuse the export without it."
            )
        raise ExportNeedsTensorFlow(
            f"--runtime {runtime} exports the model to ONNX once (tf2onnx converts its "
            f"TensorFlow graph); run this first call with KERAS_BACKEND=tensorflow (running "
            f"on {keras.backend.backend()}). Later runs reuse the export on any backend."
        )


def _require(packages, runtime: str, extra: str, purpose: str = "") -> None:
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"--runtime {runtime} needs {', '.join(missing)}{purpose} (not installed): "
            f"pip install 'keras-bert-zoo[{extra}]'"
        )


def _key(model, task, task_kwargs) -> str:
    if isinstance(model, keras.Model):  # in memory: its own config and weights
        return cache.model_fingerprint(model, task)
    return cache.fingerprint(model_source(model)[0], task, task_kwargs)


def _needs_export(key: str, runtime: str, precision: str) -> bool:
    ready = ["onnx-float32"] + (["openvino-float32"] if runtime == "openvino" else [])
    if not (runtime == "openvino" and precision == "int8"):  # that one depends on the data
        ready.append(f"{runtime}-{precision}")
    return not any(cache.is_built(cache.variant_dir(key, v)) for v in ready)


def load_runner(
    model,
    task: str,
    runtime: str = "keras",
    precision: str = "float32",
    sample: dict | None = None,
    task_kwargs: dict | None = None,
    jit_compile: bool | None = None,
    tolerance: float = quality.DEFAULT_TOLERANCE,
    quantization_options: dict | None = None,
):
    """The runner of `model` (a preset name or directory, a run directory, or a Keras task
    model in memory, exported as it is) for `task`.

    Args:
        sample: the preprocessor's arrays of the data to run (all of it is fine: rows are
            drawn from it), to calibrate OpenVINO's int8 and to measure any int8 model
            against float32 when it is written (`runtimes.quality`).
        task_kwargs: the task builder's arguments (an embedder's pooling); part of the key.
        jit_compile: for `keras`, compile the model with it (None: leave it uncompiled).
        quantization_options: passed to the quantizer (`quantize_dynamic` for ONNX Runtime,
            `nncf.quantize` for OpenVINO); part of the cache key.

    For `keras` the runner is the Keras task model itself.
    """
    in_memory = isinstance(model, keras.Model)
    preset = None if in_memory else model_source(model)[0]
    task_kwargs = dict(task_kwargs or {})
    if in_memory:
        check_model_runtime(runtime, precision)
    key = None if runtime == "keras" else _key(model if in_memory else preset, task, task_kwargs)
    _check(runtime, precision, key)
    options = dict(quantization_options or {})
    if runtime == "keras" and in_memory:
        return model
    if runtime == "keras":
        return _keras(preset, task, task_kwargs, precision, sample, jit_compile, tolerance)

    def export(staging):
        from keras_bert_zoo.export import onnx  # TensorFlow at its top: only when exporting

        network = model if in_memory else from_preset(preset, task=task, **task_kwargs)
        onnx.export_onnx(network, staging, overwrite=True)

    onnx_float = cache.build_once(cache.variant_dir(key, "onnx-float32"), export, "ONNX export")
    if runtime == "onnx":
        if precision == "float32":
            return OnnxRunner(onnx_float, "float32")
        suffix = _digest(options) if options else ""
        target = cache.variant_dir(key, "onnx-int8" + (f"-{suffix}" if suffix else ""))

        def quantize(staging):
            shutil.copy(onnx_float / EXPORT_CONFIG, staging / EXPORT_CONFIG)
            quantize_onnx(onnx_float / "model.onnx", staging / "model.onnx", "int8", **options)
            reference, candidate = OnnxRunner(onnx_float, "float32"), OnnxRunner(staging, "int8")
            return _measure(task, reference, candidate, sample, None, tolerance, staging)

        return _reuse(OnnxRunner, target, quantize, "ONNX Runtime int8 model")

    def convert(staging):
        import openvino  # optional `openvino` extra, checked above

        converted = openvino.convert_model(str(onnx_float / "model.onnx"))
        # float32 weights as exported: save_model's default halves them to float16
        openvino.save_model(converted, str(staging / "model.xml"), compress_to_fp16=False)
        shutil.copy(onnx_float / EXPORT_CONFIG, staging / EXPORT_CONFIG)

    vino_float = cache.build_once(
        cache.variant_dir(key, "openvino-float32"), convert, "OpenVINO model"
    )
    if precision == "float32":
        return OpenVinoRunner(vino_float, "float32")
    if sample is None:
        raise ValueError(
            "OpenVINO int8 calibrates on the data it will run: pass `sample` (the "
            "preprocessor's arrays of a few hundred of its rows)."
        )
    calibration, held_out, disjoint = quality.split_rows(len(sample["token_ids"]), True)
    items = [_trimmed(sample, row) for row in calibration]
    suffix = _digest({"rows": [_digest(i) for i in items], **options})
    target = cache.variant_dir(key, f"openvino-int8-{suffix}")

    def calibrate(staging):
        import nncf  # optional `openvino` extra, checked above
        import openvino  # optional `openvino` extra, checked above

        source = openvino.Core().read_model(str(vino_float / "model.xml"))
        settings = {"model_type": nncf.ModelType.TRANSFORMER, "subset_size": len(items)}
        quantized = nncf.quantize(source, nncf.Dataset(items), **{**settings, **options})
        openvino.save_model(quantized, str(staging / "model.xml"), compress_to_fp16=False)
        shutil.copy(vino_float / EXPORT_CONFIG, staging / EXPORT_CONFIG)
        reference = OpenVinoRunner(vino_float, "float32")
        candidate = OpenVinoRunner(staging, "int8")
        rows = (held_out, disjoint)
        return _measure(task, reference, candidate, sample, rows, tolerance, staging)

    return _reuse(OpenVinoRunner, target, calibrate, "OpenVINO int8 model")


def _keras(preset, task, task_kwargs, precision, sample, jit_compile, tolerance):
    network = from_preset(preset, task=task, **task_kwargs)
    if precision == "int8":
        float32 = None if sample is None else quality.outputs_on_rows(network, sample, None, task)
        quantize_keras(network, "int8")
        bucketed_prediction.forget_graph(network)
        if float32 is not None:
            quality.compare(task, float32, network, sample, "Keras int8", tolerance)
    if jit_compile is not None:
        network.compile(jit_compile=jit_compile)
    return network


def _reuse(runner_class, target, build, what: str):
    built = cache.build_once(target, build, what)
    recorded = built / quality.QUALITY_FILE
    if recorded.is_file():
        result = json.loads(recorded.read_text())
        if not result["within_tolerance"]:  # said when written; said again on every use
            logger.warning(
                "QUALITY LOSS: this %s lost %.1f points of %s against float32 when it was "
                "written (tolerance %.1f).",
                what,
                100 * result["loss"],
                result["metric"],
                100 * result["tolerance"],
            )
    return runner_class(built, "int8")


def _measure(task, reference, candidate, sample, rows, tolerance, staging) -> dict:
    if sample is None:
        logger.warning("%s written without a quality check (no sample of the data).", candidate)
        return {}
    float32 = quality.outputs_on_rows(reference, sample, rows, task)
    what = f"{candidate.runtime} int8"
    result = quality.compare(task, float32, candidate, sample, what, tolerance)
    (staging / quality.QUALITY_FILE).write_text(json.dumps(result, indent=2) + "\n")
    return {"quality": result}


def _trimmed(sample: dict, row: int) -> dict:
    length = int(real_lengths({k: v[row : row + 1] for k, v in sample.items()})[0])
    return {k: np.asarray(v[row : row + 1, : max(length, 1)], np.int32) for k, v in sample.items()}


def _digest(value) -> str:
    if isinstance(value, dict) and all(isinstance(v, np.ndarray) for v in value.values()):
        text = b"".join(v.tobytes() + str(v.shape).encode() for v in value.values())
    else:
        text = json.dumps(value, sort_keys=True, default=str).encode()
    return hashlib.sha256(text).hexdigest()[:12]
