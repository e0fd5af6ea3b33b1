"""The runners: one batch of the preprocessor's int32 arrays in, the task model's outputs out.

A runner is called as the Keras task model is (`runner(inputs)`), returns numpy arrays in
the same structure (one array, or a dict for a question answerer or an encoder), and has
`run_batches(inputs, batch_size)`, which `training.bucketed_prediction.predict` uses to run
it over length buckets. Both runtimes take any batch size and length (the exports have
dynamic `batch` and `sequence` axes), so buckets are steps of 8 tokens and no batch is filled.
"""

import json
from pathlib import Path

import numpy as np

from keras_bert_zoo.training.batching import run_in_batches

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")  # as `export.onnx` writes them
EXPORT_CONFIG = "export.json"  # `export.onnx`'s record of the task and its outputs


class Runner:
    """Common to the exported runtimes; subclasses set `_outputs(feed) -> list of arrays`."""

    def __init__(self, directory, runtime: str, precision: str):
        self.directory = Path(directory)
        self.runtime, self.precision = runtime, precision
        config = json.loads((self.directory / EXPORT_CONFIG).read_text())
        self.task = config["task"]
        self.task_config = config.get("task_config", {})
        self.output_names = list(config["outputs"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.runtime} {self.precision}, {self.directory})"

    @property
    def description(self) -> str:
        return f"{self.runtime} {self.precision}"

    def __call__(self, inputs: dict):
        feed = {name: np.ascontiguousarray(inputs[name], np.int32) for name in INPUT_NAMES}
        arrays = dict(zip(self.output_names, self._outputs(feed), strict=True))
        return arrays["output_0"] if list(arrays) == ["output_0"] else arrays

    def run_batches(self, inputs: dict, batch_size: int, batch_done=None):
        return run_in_batches(self, inputs, batch_size, batch_done)

    def predict(self, inputs: dict, batch_size: int = 64, verbose=0):
        """Keras' `predict` signature, for callers that take either."""
        return self.run_batches(inputs, batch_size)


class OnnxRunner(Runner):
    """ONNX Runtime's CPU session on an export directory (`model.onnx`, `export.json`)."""

    def __init__(self, directory, precision: str):
        super().__init__(directory, "onnx", precision)
        import onnxruntime  # optional `onnx` extra, checked when the run starts

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # its warnings on unused initializers say nothing here
        self.session = onnxruntime.InferenceSession(
            str(self.directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._names = [output.name for output in self.session.get_outputs()]

    def _outputs(self, feed):
        values = dict(zip(self._names, self.session.run(None, feed), strict=True))
        return [values[name] for name in self.output_names]


class OpenVinoRunner(Runner):
    """OpenVINO's CPU plugin on a converted model (`model.xml` / `model.bin`)."""

    def __init__(self, directory, precision: str):
        super().__init__(directory, "openvino", precision)
        import openvino  # optional `openvino` extra, checked when the run starts

        # float32 computes in float32: on CPUs with bfloat16 units (AMX, AVX512-BF16)
        # OpenVINO's default would run it in bfloat16, and it could no longer match Keras.
        # int8 keeps that default for what is not int8: its quality is measured as it runs.
        hint = {"INFERENCE_PRECISION_HINT": "f32"} if precision == "float32" else {}
        self.compiled = openvino.Core().compile_model(
            str(self.directory / "model.xml"), "CPU", hint
        )
        self._request = self.compiled.create_infer_request()
        self._ports = [
            next(p for p in self.compiled.outputs if name in p.get_names())
            for name in self.output_names
        ]

    def _outputs(self, feed):
        results = self._request.infer(feed)
        return [np.array(results[port]) for port in self._ports]  # a copy: buffers are reused
