"""Inference of the task models (`TaskModel`'s half that predicts): tokenized inputs in length
buckets or packed rows, in the runtime chosen by `use_runtime` (Keras, or an ONNX Runtime /
OpenVINO export of the current weights, `kbz.runtimes`), and the task's decoding."""

from keras_bert_zoo.finetuning.task_training import AUTO
from keras_bert_zoo.runtimes import DEFAULT_PRECISION, DEFAULT_RUNTIME
from keras_bert_zoo.runtimes.loading import check_model_runtime, model_runner
from keras_bert_zoo.training import packed_prediction

PREDICT_BATCH_SIZE = 64


class TaskInference:
    """A task model's inference; mixed into `TaskModel`, which sets `runtime`, `precision`,
    `behaviour` and `job()`."""

    def predict_inputs(self, x) -> dict:
        """The tokenized model inputs of raw `x` (what `predict` runs)."""
        return self.job().arrays(self.raw_data(x))[0]

    def predict_arrays(self, inputs: dict, batch_size=None, packing=AUTO):
        """The outputs for tokenized `inputs`, sorted by length and trimmed to buckets
        (`training.bucketed_prediction`), or a classifier's, reranker's or embedder's packed
        into rows (`packing` True, False or "auto", `training.packed_prediction`): the same
        values as full padding. In the runtime of `use_runtime`."""
        return packed_prediction.predict_outputs(
            self.runner(inputs), inputs, batch_size or PREDICT_BATCH_SIZE,
            self.behaviour.sequence_outputs, packing=packing,
        )  # fmt: skip

    def use_runtime(self, runtime=DEFAULT_RUNTIME, precision=DEFAULT_PRECISION):
        """Runs this model's inference (`predict`, `evaluate` and the task's own: `classify`,
        `tag`, `answer`, `encode`, `score`, `rank`) in `runtime` ("keras", "onnx" or
        "openvino") and `precision` ("float32", or "int8" with an exported runtime), as
        `kbz predict` / `kbz embed --runtime --precision` run files; returns the model.

        The model is exported as it is on its first prediction (on TensorFlow: tf2onnx) into
        the cache (`kbz.runtimes`), and reused while its weights stay (after a `fit`, the
        next prediction exports again). OpenVINO's int8 calibrates on that first call's
        inputs (a few hundred of your texts make a good one), and any int8 model is measured
        against float32 on them when written.

        >>> embedder = kbz.BertEmbedder.from_preset("minilm").use_runtime("openvino", "int8")
        >>> vectors = embedder.encode(corpus_texts)
        """
        check_model_runtime(runtime, precision)
        self.runtime, self.precision = runtime, precision
        return self

    def runner(self, sample: dict):
        """What runs the model's inference: itself (the Keras runtime), else its exported
        runtime (`use_runtime`), exported from the current weights; `sample` (tokenized
        inputs) calibrates and checks a new int8 export."""
        return model_runner(self, self.task, self.runtime, self.precision, sample)

    def decode(self, dataset, batch_size=None):
        """The behaviour's predictions for a raw dataset (`classify`, `tag`, `answer`)."""
        job = self.job()
        inputs, _, extra = job.arrays(dataset)
        return job.predict(dataset, self.predict_arrays(inputs, batch_size), extra)
