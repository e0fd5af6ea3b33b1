"""ONNX export for ONNX Runtime: token ids in, the task's raw outputs out.

`export_onnx(model, "exports/sentiment_onnx", preprocessor=pre)` writes a directory with
- `model.onnx`: int32 `token_ids`, `segment_ids`, `padding_mask` `[batch, sequence]` (both
  axes dynamic) -> the outputs of the SavedModel's `serve_token_ids` signature, by the same
  names: `output_0` for a classifier (logits `[batch, classes]`), a tagger (logits
  `[batch, sequence, tags]`) and an embedder (`[batch, hidden]`); `start_logits` and
  `end_logits` for a question answerer; `sequence_output` and `pooled_output` for an encoder;
- `vocab.txt` and `export.json` (task, its settings such as `label_names`, the sequence
  length, `lowercase`, input and output names, quantization), so a runtime without this
  package can tokenize: the ids equal Hugging Face `tokenizers`' `BertWordPieceTokenizer`
  with the same vocabulary and `lowercase`.

Conversion: tf2onnx (`from_function`) on the TensorFlow graph of the model, as Keras' own
`model.export(format="onnx")` does on TensorFlow. That Keras path is not used as is because
it stops at the exact-erf GELU: TensorFlow computes it with `Erfc`, which tf2onnx 1.17 cannot
convert; `_erfc` below maps it to ONNX `1 - Erf(x)` (ONNX has no Erfc). Tokenization stays
outside the ONNX graph (ONNX has no WordPiece op in its standard domain).
"""

import json
import logging
from pathlib import Path

import keras
import numpy as np

from keras_bert_zoo.extras import require_tensorflow

tf = require_tensorflow("ONNX export (tf2onnx)")

from keras_bert_zoo.export.quantization import check_quantize, quantize_onnx  # noqa: E402
from keras_bert_zoo.export.serving import task_of  # noqa: E402
from keras_bert_zoo.saving import ownership  # noqa: E402
from keras_bert_zoo.saving.atomic import check_replaceable, staged_directory  # noqa: E402

logger = logging.getLogger(__name__)
INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
OPSET = 17  # ONNX Runtime >= 1.14 runs it; LayerNormalization is a single op from 17 on
MODEL_FILE, CONFIG_FILE, VOCABULARY_FILE = "model.onnx", "export.json", "vocab.txt"
INSTALL_HINT = "pip install 'keras-bert-zoo[onnx]'"


def require_onnx():
    """`(onnx, tf2onnx)`, or an ImportError naming the missing package and the extra."""
    try:
        import onnx  # optional `onnx` extra: only ONNX export needs it
        import onnxruntime  # noqa: F401  # optional `onnx` extra: quantization and checks
        import tf2onnx  # optional `onnx` extra: the TensorFlow -> ONNX converter
    except ImportError as error:
        raise ImportError(
            f"ONNX export needs the `onnx` extra (onnx, onnxruntime, tf2onnx); "
            f"{error.name or 'one of them'} is not installed. Install it with: {INSTALL_HINT}"
        ) from error
    return onnx, tf2onnx


def _erfc(ctx, node, name, args):
    """tf2onnx handler: TensorFlow `Erfc(x)` (exact GELU) as ONNX `1 - Erf(x)`."""
    node.type = "Erf"
    one = ctx.make_const(f"{name}/one", np.array(1, dtype=np.float32))
    ctx.insert_new_node_on_output("Sub", node.output[0], inputs=[one.output[0], node.output[0]])


def _name_dynamic_axes(proto) -> None:
    """tf2onnx calls unknown dimensions `unk__N`; name them `batch` and `sequence`."""
    for value in (*proto.graph.input, *proto.graph.output):
        dims = value.type.tensor_type.shape.dim
        for index, name in ((0, "batch"), (1, "sequence")):
            if len(dims) > index and not dims[index].HasField("dim_value"):
                dims[index].dim_param = name


def _check_path(path, overwrite: bool) -> Path:
    path = Path(path)
    if path.suffix == ".onnx":
        raise ValueError(
            f"The ONNX export path is a directory (it holds {MODEL_FILE}, {VOCABULARY_FILE} "
            f"and {CONFIG_FILE}). Received: {path}; pass e.g. {path.with_suffix('')}"
        )
    return check_replaceable(path, ownership.ONNX, overwrite, "an ONNX export")


def _sidecar(model, task, preprocessor, output_names, quantize) -> dict:
    config = {
        "format": "onnx",
        "task": task,
        "task_config": dict(getattr(model, "task_config", {}) or {}),
        "inputs": list(INPUT_NAMES),
        "outputs": output_names,
        "opset": OPSET,
        "quantization": quantize,
        "max_sequence_length": int(model.get_layer("position_embedding").max_sequence_length),
    }
    if preprocessor is not None:
        config["sequence_length"] = int(preprocessor.sequence_length)
        config["lowercase"] = bool(preprocessor.tokenizer.lowercase)
        config["vocabulary"] = VOCABULARY_FILE
    return config


def export_onnx(
    model: keras.Model,
    path,
    preprocessor=None,
    quantize: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Exports `model` (encoder or task model) as an ONNX directory for ONNX Runtime.

    Args:
        model: encoder, classifier, tagger, question answerer or embedder (float32).
        path: the directory to write (`model.onnx`, `export.json`, `vocab.txt`).
        preprocessor: a `kbz.BertPreprocessor` (default: a task model's own); its vocabulary,
            casing and sequence length go into the directory for runtime tokenization (None:
            ids only, no vocabulary).
        quantize: "int8" for ONNX Runtime's dynamic int8 quantization of the weights.
        overwrite: replace an existing directory.

    >>> kbz.export.export_onnx(model, "exports/sentiment_onnx", preprocessor=pre)
    >>> session = onnxruntime.InferenceSession("exports/sentiment_onnx/model.onnx")
    >>> ids = {name: value.numpy() for name, value in pre(["a gorgeous film"]).items()}
    >>> (logits,) = session.run(None, ids)
    """
    onnx, tf2onnx = require_onnx()
    path = _check_path(path, overwrite)
    task = task_of(model)
    if preprocessor is None:
        preprocessor = getattr(model, "preprocessor", None)  # a task model's own
    check_quantize(quantize)
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "ONNX export converts the model's TensorFlow graph: run it with "
            f"KERAS_BACKEND=tensorflow (running on {keras.backend.backend()})."
        )
    if model.dtype_policy.name != "float32":
        raise ValueError(
            f"ONNX export takes a float32 model. Received dtype policy "
            f"{model.dtype_policy.name!r}; rebuild the model without mixed precision."
        )
    spec = [tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES]

    @tf.function(input_signature=spec)
    def serve_token_ids(token_ids, segment_ids, padding_mask):
        inputs = dict(zip(INPUT_NAMES, (token_ids, segment_ids, padding_mask), strict=True))
        outputs = model(inputs, training=False)
        return dict(outputs) if isinstance(outputs, dict) else {"output_0": outputs}

    proto, _ = tf2onnx.convert.from_function(
        serve_token_ids, input_signature=spec, opset=OPSET, custom_op_handlers={"Erfc": (_erfc, [])}
    )
    _name_dynamic_axes(proto)
    output_names = sorted(output.name for output in proto.graph.output)
    with staged_directory(path) as staging:
        model_file = staging / MODEL_FILE
        if quantize is None:
            onnx.save(proto, str(model_file))
        else:
            onnx.save(proto, str(staging / "float32.onnx"))
            quantize_onnx(staging / "float32.onnx", model_file, quantize)
            (staging / "float32.onnx").unlink()
        if preprocessor is not None:
            tokens = preprocessor.tokenizer.get_vocabulary()
            (staging / VOCABULARY_FILE).write_text("\n".join(tokens) + "\n", encoding="utf-8")
        config = _sidecar(model, task, preprocessor, output_names, quantize)
        (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    logger.info("Exported %s (%s) to %s as ONNX", model.name, task, path)
    return path
