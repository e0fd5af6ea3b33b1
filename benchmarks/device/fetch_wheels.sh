#!/usr/bin/env bash
# Downloads what the GPU machine's image lacks for `benchmarks/accelerator.py` into the ignored
# .device_wheels/ (about 2.8 MB): Keras and the two of its requirements that the image has not
# (namex, optree; absl-py, numpy, rich, h5py, ml-dtypes and packaging are there, per the device
# tool's KINDS.md). Wheels for CPython 3.12 on x86-64 Linux, the image's Python.
# Usage, from the repository root:  benchmarks/device/fetch_wheels.sh [PYTHON]
set -euo pipefail
python=${1:-python3}
cd "$(dirname "$0")/../.."
rm -rf .device_wheels
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .device_wheels \
    keras==3.15.1 namex==0.1.0 optree==0.20.0
ls -l .device_wheels
du -sh .device_wheels
