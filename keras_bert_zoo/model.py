"""`BertModel`: the functional Keras model every builder returns, with its inputs checked.

A Keras functional model with dict inputs flattens the dict it is called with by sorted key
and pairs the values with its inputs by position: an extra key (say `labels`) silently
shifts every input by one, and float ids are silently truncated to integers. This thin
subclass (the one exception to "no Model subclasses", for that reason) checks the dict by
name and dtype first: missing keys, non-integer ids (concrete values: arrays and eager
tensors) and non-dict inputs are clear errors, extra keys are dropped (documented, tested).
`fit`/`evaluate`/`predict` (and their `*_on_batch` forms) check dict data and a `tf.data`
dataset's element spec the same way before Keras' data adapters see them (those fail on
string arrays with "Invalid dtype: str32").

The model also carries its task: `task` ("encoder", "pretrainer", "classifier", "tagger",
"question_answerer") and `task_config` (the builder's settings, e.g. `num_classes`,
`multi_label`, `label_names`) are constructor arguments returned by `get_config`, so a
`.keras` round trip keeps them and export reads them instead of guessing from shapes.
Everything else is plain `keras.Model`.
"""

import contextlib
import sys
from collections.abc import Mapping

import keras
import numpy as np

from keras_bert_zoo.layers.backend import BACKEND, is_traced
from keras_bert_zoo.layers.input_checks import INPUT_NAMES, InputChecks


def _dtype(value) -> str:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = np.asarray(value).dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "OSU":
        return "string"
    return keras.backend.standardize_dtype(dtype)


def _all_layers(model):
    """Every layer of `model`, nested models' included."""
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _all_layers(layer)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertModel(keras.Model):
    """A functional model whose dict inputs are matched by name and must be integers.

    Build it like `keras.Model(inputs=dict_of_inputs, outputs=...)`, plus the task:
    `BertModel(inputs, outputs, task="classifier", task_config={"num_classes": 2})`.
    """

    # (*args, **kwargs) keeps Keras' functional (de)serialization: `from_config` rebuilds the
    # graph and passes the remaining config keys (`task`, `task_config`) here.
    def __init__(self, *args, task: str = "encoder", task_config: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.task = str(task)
        self.task_config = dict(task_config or {})

    def get_config(self):
        config = super().get_config()
        config.update(task=self.task, task_config=dict(self.task_config))
        return config

    def _check_inputs(self, inputs):
        expected = list(self.input) if isinstance(self.input, Mapping) else None
        if expected is None:
            return inputs
        if not isinstance(inputs, Mapping):
            raise ValueError(
                f"Model '{self.name}' takes a dict with keys {sorted(expected)}. Received: "
                f"{type(inputs).__name__}. Build it with kbz.BertPreprocessor(...)(texts)."
            )
        missing = [key for key in expected if key not in inputs]
        if missing:
            raise ValueError(
                f"Model '{self.name}' is missing input(s) {missing}. Expected keys: "
                f"{sorted(expected)}. Received keys: {sorted(inputs)}."
            )
        for key in expected:
            if is_traced(inputs[key]):  # Keras' own graph-mode plumbing (e.g. fit under a
                continue  # tf.distribute strategy) hands over cast placeholders
            dtype = _dtype(inputs[key])
            if "int" not in dtype:
                raise ValueError(
                    f"`{key}` must hold integer ids (int32). Received dtype {dtype}. "
                    + (
                        "Tokenize text first (kbz.BertPreprocessor)."
                        if dtype == "string"
                        else "Float ids would be truncated silently; cast on purpose "
                        "(tf.cast / np.int32) if they are whole numbers."
                    )
                )
        return {key: inputs[key] for key in expected}

    def __call__(self, inputs, *args, **kwargs):
        return super().__call__(self._check_inputs(inputs), *args, **kwargs)

    def _check_values(self, inputs):
        """Range and padding checks of concrete dict data, before any step is compiled.

        On JAX and PyTorch the compiled steps can carry no assertion (TensorFlow's graph
        steps do), so `InputChecks` would only see shapes there: it reads the data here.
        """
        checks = [layer for layer in _all_layers(self) if isinstance(layer, InputChecks)]
        values = [inputs.get(name) for name in INPUT_NAMES]
        if checks and not any(v is None or is_traced(v) for v in values):
            checks[0].check_values(*(keras.ops.convert_to_numpy(v) for v in values))

    def _check_data(self, x):
        """`x` of fit/evaluate/predict: dicts checked (extra keys dropped), datasets' specs."""
        if isinstance(x, Mapping):
            checked = self._check_inputs(x)
            if BACKEND != "tensorflow":
                self._check_values(checked)
            return checked
        tf = sys.modules.get("tensorflow")  # a tf.data dataset implies TensorFlow is loaded
        if tf is not None and isinstance(x, tf.data.Dataset) and isinstance(self.input, Mapping):
            spec = x.element_spec
            spec = spec[0] if isinstance(spec, tuple) else spec
            if isinstance(spec, Mapping):
                missing = [key for key in self.input if key not in spec]
                dtypes = {key: spec[key].dtype.name for key in self.input if key in spec}
                wrong = {key: dtype for key, dtype in dtypes.items() if "int" not in dtype}
                if missing or wrong:
                    raise ValueError(
                        f"Model '{self.name}': the dataset's features must include "
                        f"{sorted(self.input)} as integer ids. Missing: {missing}; non-integer "
                        f"dtypes: {wrong}. Map the texts through kbz.BertPreprocessor first."
                    )
        return x

    def build_optimizer(self) -> None:
        """Creates the compiled optimizer's slot variables now, before a step is traced.

        Without a distribution strategy Keras' TensorFlow trainer builds the optimizer inside
        the first trace of the train step, and a `tf.function` whose first trace creates
        variables is traced a second time, which doubles the Python tracing of every run's
        first step (one of the costs in benchmarks/RESULTS.md, "Fixed costs of a fine-tuning
        run"). `fit` and `train_on_batch` call this.
        """
        optimizer = getattr(self, "optimizer", None)
        if optimizer is None or optimizer.built:
            return
        with self._strategy_scope():
            optimizer.build(self.trainable_variables)

    def _strategy_scope(self):
        """The `tf.distribute` scope the model was built in, where the state Keras' own first
        step would make belongs (TensorFlow only: `distribute_strategy`)."""
        strategy = getattr(self, "distribute_strategy", None)
        return strategy.scope() if strategy is not None else contextlib.nullcontext()

    def build_compiled_loss(self, x, y=None, sample_weight=None) -> None:
        """Creates the compiled loss's and metrics' state now, from the shapes of `x` (a
        tf.data dataset, or arrays with `y`), before a step is traced.

        The same double trace as `build_optimizer`'s: Keras' TensorFlow trainer creates the
        per-output loss trackers (`compile_loss/<output>_loss/total`, `count`) inside the first
        trace unless a distribution strategy is set, so every `fit` of a multi-output model
        traced its train step twice. Keras' own symbolic build (what it runs under a strategy)
        makes them from the data's shapes. TensorFlow only: the JAX and PyTorch trainers build
        symbolically already.
        """
        if BACKEND != "tensorflow" or not getattr(self, "compiled", False):
            return
        tf = sys.modules["tensorflow"]
        if isinstance(x, tf.data.Dataset):
            batch = x.element_spec  # TensorSpecs: the shapes and dtypes Keras reads
        elif isinstance(x, Mapping) and all(hasattr(v, "shape") for v in x.values()):
            batch = (x, y, sample_weight)
        else:
            return  # a generator or PyDataset: Keras builds in the trace, as before
        with self._strategy_scope():
            self._symbolic_build(data_batch=batch)

    def fit(self, x=None, y=None, *args, **kwargs):
        x = self._check_data(x)
        tf = sys.modules.get("tensorflow")
        if tf is not None and isinstance(x, tf.data.Dataset) and len(args) < 7:
            # Keras ignores `shuffle` for a dataset (it is shuffled as it was built) but warns
            # about its default True: the default here is what happens (`args` stop before it).
            kwargs.setdefault("shuffle", False)
        self.build_optimizer()
        self.build_compiled_loss(x, y, kwargs.get("sample_weight"))
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        return super().evaluate(self._check_data(x), *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        return super().predict(self._check_data(x), *args, **kwargs)

    def train_on_batch(self, x, *args, **kwargs):
        x = self._check_data(x)
        self.build_optimizer()
        return super().train_on_batch(x, *args, **kwargs)

    def test_on_batch(self, x, *args, **kwargs):
        return super().test_on_batch(self._check_data(x), *args, **kwargs)

    def predict_on_batch(self, x):
        return super().predict_on_batch(self._check_data(x))
