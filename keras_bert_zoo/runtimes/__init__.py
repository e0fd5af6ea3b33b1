"""Inference runtimes: the same task model run by Keras, ONNX Runtime or OpenVINO, in float32
or int8, behind one call.

`load_runner(model, task, runtime, precision, sample=x)` gives a runner:
`outputs = runner(inputs)` takes the preprocessor's int32 `token_ids`, `segment_ids`,
`padding_mask` `[batch, length]` (any length: the exports have dynamic axes) and returns what
the Keras task model returns (an array, or a dict for a question answerer).
`training.bucketed_prediction.predict` runs a runner as it runs a model, in length buckets of
8 tokens, so no batch is padded to the full sequence length.

- `keras`: the task model itself; `int8` is Keras' own `model.quantize("int8")`;
- `onnx`: ONNX Runtime on `kbz.export_onnx`'s file; `int8` is ONNX Runtime's dynamic
  quantization of it (`export.quantization.quantize_onnx`), no calibration needed;
- `openvino`: OpenVINO's converter (`openvino.convert_model`) on the same ONNX file; `int8`
  is NNCF's static post-training quantization, calibrated on rows drawn from `sample`
  (the user's own data).

Exports are made once and kept in `cache_dir()/runtimes/<fingerprint>/`, keyed by what the
model computes (its preset's architecture, task settings, vocabulary and weights), the package
version and the precision (`runtimes.cache`); never next to the user's files. When an int8
model is written, `runtimes.quality` measures it against float32 on rows of `sample` it was
not calibrated on and warns when it loses more than the tolerance.

>>> runner = kbz.runtimes.load_runner("runs/sst2", "classifier", "onnx", "int8", sample=x)
>>> logits = runner(x)
"""

from keras_bert_zoo._lazy import lazy_attributes

RUNTIMES = ("keras", "onnx", "openvino")
PRECISIONS = ("float32", "int8")
DEFAULT_RUNTIME, DEFAULT_PRECISION = "keras", "float32"

_EXPORTS = {
    "load_runner": "keras_bert_zoo.runtimes.loading",
    "check_runtime": "keras_bert_zoo.runtimes.loading",
}
__all__ = sorted([*_EXPORTS, "RUNTIMES", "PRECISIONS", "DEFAULT_RUNTIME", "DEFAULT_PRECISION"])
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
