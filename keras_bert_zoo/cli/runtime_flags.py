"""`--runtime` and `--precision`, shared by `kbz embed` and `kbz predict`."""

from keras_bert_zoo.runtimes import DEFAULT_PRECISION, DEFAULT_RUNTIME, PRECISIONS, RUNTIMES


def add_runtime_arguments(parser) -> None:
    """`--runtime keras|onnx|openvino` and `--precision float32|int8`."""
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=DEFAULT_RUNTIME,
        help="what runs the model (default: keras). onnx (ONNX Runtime, the `onnx` extra) and "
        "openvino (the `openvino` extra) run an export made on first use with TensorFlow "
        "and kept in the cache ($KBZ_CACHE_DIR/runtimes); they run Keras on its numpy "
        "backend, which loads no TensorFlow, unless KERAS_BACKEND names one",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULT_PRECISION,
        help="float32 (default), or int8: Keras' and ONNX Runtime's dynamic quantization, "
        "OpenVINO's static quantization calibrated on rows of --input. An int8 model is "
        "measured against float32 on held-out rows of --input when written; a loss above "
        "half a point is a warning",
    )
