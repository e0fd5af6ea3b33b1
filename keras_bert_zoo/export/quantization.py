"""int8 post-training quantization for export, by the well-kept quantizers of each format.

- SavedModel: Keras' own `model.quantize("int8")` (int8 weights per output channel, inputs
  quantized on the fly), which keeps the model a Keras model that `export_saved_model` writes;
- ONNX: ONNX Runtime's dynamic quantization (`quantize_dynamic`: int8 weights per output
  channel, activations quantized per batch at run time), the route ONNX Runtime documents
  for BERT on CPU.

Neither needs calibration data. Accuracy and speed: `benchmarks/RESULTS.md`, "Export formats:
SavedModel vs ONNX, float32 vs int8".
"""

import logging
import warnings
from pathlib import Path

import keras

QUANTIZE_MODES = ("int8",)


def check_quantize(quantize) -> str | None:
    """`quantize` if it is None or a supported mode, else a ValueError naming the choices."""
    if quantize is not None and quantize not in QUANTIZE_MODES:
        raise ValueError(
            f"`quantize` must be one of {QUANTIZE_MODES} or None. Received: quantize={quantize!r}"
        )
    return quantize


def quantize_keras(model: keras.Model, quantize: str) -> keras.Model:
    """Quantizes `model` in place with Keras (`model.quantize`) and returns it.

    Keras warns once for each layer type without weights to quantize (LayerNormalization,
    Dropout, ...); those warnings say nothing about the result and are silenced.
    """
    check_quantize(quantize)
    if model.dtype_policy.name != "float32":
        raise ValueError(
            f"int8 quantization starts from a float32 model. Received a model with dtype "
            f"policy {model.dtype_policy.name!r}; build it without mixed precision."
        )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*does not have a `quantize` method.*")
        model.quantize(quantize)
    return model


def quantize_onnx(source, destination, quantize: str, **options) -> Path:
    """Writes the int8 dynamically-quantized copy of the ONNX file `source` to `destination`;
    `options` replace `quantize_dynamic`'s arguments chosen here."""
    check_quantize(quantize)
    from onnxruntime.quantization import QuantType, quantize_dynamic  # optional `onnx` extra

    # Per output channel, as Keras quantizes: one scale per tensor cost all-MiniLM-L6-v2's
    # vectors a cosine of 0.90-0.98 to the float ones; per channel 0.97-0.995 (8 sentences).
    # ONNX Runtime logs a suggestion to pre-process (shape inference for static
    # quantization) on the root logger at every call; dynamic quantization needs none.
    hint = _DropMessage("consider to run pre-processing before quantization")
    logging.getLogger().addFilter(hint)
    try:
        settings = {"weight_type": QuantType.QInt8, "per_channel": True, **options}
        quantize_dynamic(str(source), str(destination), **settings)
    finally:
        logging.getLogger().removeFilter(hint)
    return Path(destination)


class _DropMessage(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record) -> bool:
        return self.text not in record.getMessage()
