"""Packed vs bucketed prediction of a classifier and an embedder, shared by the TensorFlow,
JAX and PyTorch test files: examples of many lengths (one filling a row alone, rows with
unused places, a last batch of fewer rows) give the same logits or vectors, in the order
given, as length buckets and as full padding, within float32 rounding."""

import keras
import numpy as np

import keras_bert_zoo as kbz
from keras_bert_zoo.training import bucketed_prediction, packed_prediction
from keras_bert_zoo.training.packing import pack_rows

# 21 examples up to 32 tokens: 32 fills a row of its own
LENGTHS = (5, 9, 3, 32, 7, 2, 11, 4, 6, 1, 17, 8, 25, 3, 12, 2, 19, 6, 9, 14, 4)
WIDTH = 32  # a bucket everywhere, so rows of 32 tokens on every backend
BATCH_SIZE = 6  # 2 rows a batch: 4 batches, the last of 1 row


def tokenized(vocabulary_size: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    mask = (np.arange(WIDTH)[None] < np.array(LENGTHS)[:, None]).astype("int32")
    ids = rng.integers(1, vocabulary_size, mask.shape) * mask
    segments = (rng.random(mask.shape) < 0.5).astype("int32") * mask
    return {"token_ids": ids.astype("int32"), "segment_ids": segments, "padding_mask": mask}


def check_packed_prediction(tiny: dict, head, jit_compile) -> None:
    """`head`: a classifier's classes (an int), "reranker", or an embedder's pooling."""
    keras.utils.set_random_seed(0)
    encoder = kbz.build_encoder(**tiny)
    if isinstance(head, int):
        model, width = kbz.build_classifier(encoder, num_classes=head), head
    elif head == "reranker":
        model, width = kbz.build_reranker(encoder), 1
    else:
        model, width = kbz.build_embedder(encoder, pooling=head), tiny["hidden_dim"]
    model.compile(jit_compile=jit_compile)
    x = tokenized(tiny["vocabulary_size"])
    rows = pack_rows(LENGTHS, 32)  # what `predict` packs: rows of the longest example
    per_batch = round(len(rows) * BATCH_SIZE / len(LENGTHS))
    assert [len(r) for r in rows].count(1) >= 1 and min(map(len, rows)) < max(map(len, rows))
    assert 1 < per_batch and len(rows) % per_batch  # several batches, the last one partial

    seen = []
    packed = packed_prediction.predict(model, x, BATCH_SIZE, progress=seen.append)
    buckets = bucketed_prediction.prediction_buckets(model, WIDTH)
    bucketed = bucketed_prediction.predict(model, x, BATCH_SIZE, buckets, False, lambda n: None)
    full = keras.ops.convert_to_numpy(model(x, training=False))
    assert packed.shape == (len(LENGTHS), width) and packed.dtype == np.float32
    np.testing.assert_allclose(packed, bucketed, atol=2e-5)
    np.testing.assert_allclose(packed, full, atol=2e-5)
    assert sum(seen) == len(LENGTHS) and len(seen) == -(-len(rows) // per_batch)
    # a second call reuses the packed model; one example alone is a row of its own
    np.testing.assert_allclose(packed_prediction.predict(model, x, 64), packed, atol=2e-5)
    one = {k: v[3:4] for k, v in x.items()}
    np.testing.assert_allclose(packed_prediction.predict(model, one, 8), packed[3:4], atol=2e-5)
