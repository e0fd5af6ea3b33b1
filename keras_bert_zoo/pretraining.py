"""BERT pretraining: `build_pretrainer` (masked LM + next sentence prediction), losses, metrics.

The pretrainer extends the encoder's own graph (not a nested model), so the token embedding
is one layer used twice, as embedding and as the tied MLM decoder, and stays tied through
`.keras` save/load. Outputs: `mlm_logits` `[batch, max_predictions, vocabulary]` and
`nsp_logits` `[batch, 2]`, both float32 under mixed precision. The MLM loss is weighted by
`masked_lm_weights` (as `sample_weight`), so padded prediction slots count for nothing.
"""

import keras
from keras import ops

from keras_bert_zoo.encoder import architecture_of
from keras_bert_zoo.layers.common import check_positive_int, dense
from keras_bert_zoo.layers.heads import MaskedLMHead, OutputBias
from keras_bert_zoo.model import BertModel


def build_pretrainer(
    encoder: keras.Model, max_predictions: int = 20, dtype=None, name: str = "bert_pretrainer"
) -> keras.Model:
    """Adds the MLM and NSP heads to `encoder`.

    Args:
        encoder: a model from `kbz.build_encoder` / `kbz.from_preset`.
        max_predictions: masked positions per sequence (google-research/bert's
            `max_predictions_per_seq`); fixed, so XLA compiles one shape.
        dtype: dtype policy of the heads (default: the encoder's).

    Inputs: the encoder's plus `mask_positions` int32 `[batch, max_predictions]`.

    >>> pretrainer = kbz.build_pretrainer(kbz.from_preset("bert_tiny_en_uncased",
    ...                                   load_weights=False), max_predictions=20)
    """
    check_positive_int("max_predictions", max_predictions)
    architecture = architecture_of(encoder)
    dtype = dtype or encoder.get_layer("pooled_dense").dtype_policy
    inputs = dict(encoder.input)
    inputs["mask_positions"] = keras.Input(
        shape=(max_predictions,), dtype="int32", name="mask_positions"
    )
    hidden = MaskedLMHead(
        architecture["hidden_dim"], architecture["gelu_approximate"], dtype=dtype, name="mlm_head"
    )(encoder.output["sequence_output"], inputs["mask_positions"])
    token_embedding = encoder.get_layer("token_embedding")
    mlm_logits = OutputBias(architecture["vocabulary_size"], name="mlm_output_bias")(
        token_embedding(hidden, reverse=True)
    )
    nsp_logits = dense(2, "nsp_head", dtype="float32")(encoder.output["pooled_output"])
    outputs = {
        "mlm_logits": keras.layers.Identity(dtype="float32", name="mlm_logits")(mlm_logits),
        "nsp_logits": keras.layers.Identity(dtype="float32", name="nsp_logits")(nsp_logits),
    }
    return BertModel(
        inputs=inputs,
        outputs=outputs,
        name=name,
        task="pretrainer",
        task_config={"max_predictions": max_predictions},
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedLMPerplexity(keras.metrics.Metric):
    """exp(weighted mean MLM cross-entropy) over real prediction slots."""

    def __init__(self, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        losses = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
        weights = (
            ops.ones_like(losses)
            if sample_weight is None
            else ops.cast(sample_weight, losses.dtype)
        )
        self.total.assign_add(ops.sum(losses * weights))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.count))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)


def pretraining_losses() -> dict:
    """Per-output losses for `compile`: sparse cross-entropy from logits for both heads."""
    return {
        # BERT normalises by the number of real predictions: sum(w * loss) / sum(w).
        "mlm_logits": keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight", name="mlm_loss"
        ),
        "nsp_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True, name="nsp_loss"),
    }


def pretraining_metrics() -> dict:
    """MLM accuracy and perplexity (weighted by masked_lm_weights), NSP accuracy."""
    return {
        "mlm_logits": [
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            MaskedLMPerplexity(),
        ],
        "nsp_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    }


def compile_pretrainer(model: keras.Model, optimizer, jit_compile: bool = False, **kwargs):
    """`model.compile` with the pretraining losses and weighted metrics.

    Pass `sample_weight={"mlm_logits": masked_lm_weights, ...}` in the data so the MLM loss,
    accuracy and perplexity ignore padded prediction slots.
    """
    model.compile(
        optimizer=optimizer,
        loss=pretraining_losses(),
        weighted_metrics=pretraining_metrics(),
        jit_compile=jit_compile,
        **kwargs,
    )
    return model
