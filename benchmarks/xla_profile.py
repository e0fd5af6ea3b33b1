"""Where a compiled bert_small train step spends its time, op by op, on this backend.

Runs the step of `benchmarks/jax_train_step.py` (bert_small classifier, sequence 128, batch
32, XLA, `create_optimizer`, through `fit`) under the backend's profiler and prints the time
per step of each kind of compiled op (XLA names its fusions after their first ops, so
`copy_bitcast_fusion.6` counts as `copy_bitcast_fusion`), then the costliest single ops:

    KERAS_BACKEND=jax python benchmarks/xla_profile.py
    KERAS_BACKEND=tensorflow python benchmarks/xla_profile.py
    KERAS_BACKEND=jax XLA_FLAGS=--xla_dump_to=/tmp/hlo python benchmarks/xla_profile.py
    KERAS_BACKEND=jax python benchmarks/xla_profile.py --forward   # the prediction step

With `--xla_dump_to`, `grep "copy_bitcast_fusion.6 = " /tmp/hlo/*train_step*after_optimizations.txt`
shows an op's shapes and its `op_name`: the model code it came from.

JAX's profiler writes a Perfetto trace of XLA's thunks; TensorFlow's an XSpace protobuf, read
with the protobuf classes TensorFlow ships. A thunk that wraps another (a `call` around its
fusion) is counted in both, so the kinds add up to more than the step. This is how RESULTS'
"JAX vs TensorFlow train step" found the transposed copies the 3-D `Dense` left under JAX.
"""

import argparse
import collections
import glob
import gzip
import json
import re
import tempfile
import time

import keras
from jax_train_step import bert_small_classifier, classifier_batch, fit_seconds

# Wrappers around the compiled ops (Python frames, executors, TensorFlow's function call).
SKIP = re.compile(
    r"^\$|Thunk|PjRt|Pjit|Executor|Execute|Eager|Iterator|tf\.function|BlockUntil"
    r"|KernelAndDevice|multi_step_on_iterator"
)


def jax_events(directory: str, run) -> list[tuple[str, float]]:
    import jax

    with jax.profiler.trace(directory, create_perfetto_trace=True):
        run()
    path = glob.glob(f"{directory}/**/*.trace.json.gz", recursive=True)[0]
    trace = json.load(gzip.open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [(e["name"], e.get("dur", 0) / 1e3) for e in events if e.get("ph") == "X"]


def tensorflow_events(directory: str, run) -> list[tuple[str, float]]:
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(directory)
    run()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    path = glob.glob(f"{directory}/**/*.xplane.pb", recursive=True)[0]
    space.ParseFromString(open(path, "rb").read())
    events = []
    for plane in space.planes:
        names = {key: value.name for key, value in plane.event_metadata.items()}
        for line in plane.lines:
            events += [(names.get(e.metadata_id, "?"), e.duration_ps / 1e9) for e in line.events]
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="profiled steps")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    parser.add_argument("--forward", action="store_true", help="the prediction step instead")
    args = parser.parse_args()
    model = bert_small_classifier(args.dropout)
    x, y = classifier_batch(32, 128)

    def run():
        if not args.forward:
            return fit_seconds(model, x, y, args.steps)
        start = time.perf_counter()
        for _ in range(args.steps):
            keras.ops.convert_to_numpy(model.predict_on_batch(x))  # waits for the device
        return time.perf_counter() - start

    run()  # compiles
    step_ms = 1000 * run() / args.steps
    profile = jax_events if keras.backend.backend() == "jax" else tensorflow_events
    events = profile(tempfile.mkdtemp(prefix="kbz-profile-"), run)
    ops = collections.Counter()
    for name, ms in events:
        if not SKIP.search(name):
            ops[name] += ms / args.steps
    kinds = collections.Counter()
    for name, ms in ops.items():
        kinds[re.sub(r"\.\d+$", "", name)] += ms
    print(f"{keras.backend.backend()}: {step_ms:.0f} ms a step unprofiled")
    print("\n| op kind | ms per step |\n|---|---|")
    for name, ms in kinds.most_common(args.top):
        print(f"| {name} | {ms:.1f} |")
    print("\n| op | ms per step |\n|---|---|")
    for name, ms in ops.most_common(args.top):
        print(f"| {name[:100]} | {ms:.1f} |")


if __name__ == "__main__":
    main()
