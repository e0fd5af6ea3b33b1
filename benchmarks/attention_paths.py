"""The attention op alone: `fused_attention` against `explicit_attention`, per backend and mode.

    python benchmarks/attention_paths.py                       # TensorFlow: graph and XLA
    KERAS_BACKEND=jax python benchmarks/attention_paths.py     # JAX: XLA
    KERAS_BACKEND=torch python benchmarks/attention_paths.py   # PyTorch: eager

Times one call of each path (no dropout, 10 padded keys per row) on random float32 query, key
and value at bert_small's [32, 128, 8 heads, 64] and MiniLM's [32, 256, 12 heads, 32], compiled
the ways the package runs them: TensorFlow's graph (`kbz embed` / `kbz predict`) and XLA
(`fit`), JAX's XLA, PyTorch eagerly. The explicit path runs in both of its forms: the
softmax's division before the product with the values, and after it (`normalize_last`).
Best of 3 rounds of 10 calls, milliseconds, and the largest difference from the fused
path's outputs: the measurements behind the rules of `kbz.layers.attention.fused_kernel` and
`explicit_attention`'s `normalize_last` default (benchmarks/RESULTS.md, "Fused attention").
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_bert_zoo.layers.attention import explicit_attention, fused_attention  # noqa: E402

SHAPES = {"bert_small": (32, 128, 8, 64), "minilm": (32, 256, 12, 32)}
PATHS = {
    "fused": fused_attention,
    "explicit": lambda *args: explicit_attention(*args, normalize_last=False),
    "explicit, normalized last": lambda *args: explicit_attention(*args, normalize_last=True),
}


def modes():
    """`(name, compile)` for each way this backend runs a prediction."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return [("XLA", jax.jit)]
    if backend == "tensorflow":
        import tensorflow as tf

        return [
            ("graph", tf.function),
            ("XLA", lambda f: tf.function(f, jit_compile=True)),
        ]
    return [("eager", lambda f: f)]


def best_ms(function, args, calls: int = 10, rounds: int = 3) -> float:
    ops.convert_to_numpy(function(*args))  # compiles
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            ops.convert_to_numpy(function(*args)[0, 0, 0])  # waits for the result
        best = min(best, (time.perf_counter() - start) / calls)
    return 1000 * best


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"backend {keras.backend.backend()}\n")
    names = list(PATHS)
    print("| shape | mode | " + " | ".join(f"{n} ms" for n in names) + " | max difference |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for name, (batch, length, heads, head_dim) in SHAPES.items():
        query, key, value = (
            ops.convert_to_tensor(rng.normal(size=(batch, length, heads, head_dim)), "float32")
            for _ in range(3)
        )
        mask = np.ones((batch, length), "int32")
        mask[:, length - 10 :] = 0
        args = (query, key, value, ops.convert_to_tensor(mask))
        for mode, compile_ in modes():
            functions = {path: compile_(function) for path, function in PATHS.items()}
            outputs = [ops.convert_to_numpy(f(*args)) for f in functions.values()]
            difference = max(np.abs(out - outputs[0]).max() for out in outputs[1:])
            times = {}
            for _ in range(2):  # interleaved: the machine drifts
                for path, function in functions.items():
                    times[path] = min(times.get(path, float("inf")), best_ms(function, args))
            cells = " | ".join(f"{times[path]:.1f}" for path in names)
            print(
                f"| {name} {list(args[0].shape)} | {mode} | {cells} | {difference:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
