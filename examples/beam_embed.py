"""Embeds a text file (one text per line) with Apache Beam's `RunInference` and a kbz model,
into sharded outputs: `<output>-00000-of-0000N.jsonl`, one `{"line": n, "vector": [...]}` per
input line (line numbers from 1, as `kbz embed`'s rows from 0; the vectors are the same).

The input is split into `--splits` ranges of lines, each read by whichever worker takes it,
so no single process holds the file; `keras_bert_zoo.beam.KbzModelHandler` batches by length
and runs the model once per worker process. Beam's own flags pass through: the local
runner by default, and unchanged on Dataflow, Flink or Spark (`--runner DataflowRunner ...`,
with the input and output on storage the workers can read and the `beam` extra installed).

    pip install "keras-bert-zoo[beam,tensorflow]"
    python examples/beam_embed.py --model all_minilm_l6_v2 --input texts.txt \\
        --output vectors --direct_num_workers 2 --direct_running_mode multi_processing
"""

import argparse
import json

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from keras_bert_zoo.beam import KbzModelHandler


def count_lines(path: str) -> int:
    with FileSystems.open(path) as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))


def read_range(path: str, begin: int, end: int):
    """`(line number, text)` of lines `begin` to `end` (numbered from 1, end excluded)."""
    with FileSystems.open(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if number >= end:
                return
            if number >= begin:
                yield number, raw.rstrip(b"\n").removesuffix(b"\r").decode("utf-8")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="preset name or directory, or kbz run")
    parser.add_argument("--input", required=True, help="UTF-8 text file, one text per line")
    parser.add_argument("--output", required=True, help="prefix of the output shards")
    parser.add_argument("--splits", type=int, default=8, help="line ranges read in parallel")
    parser.add_argument("--shards", type=int, default=2, help="output files")
    parser.add_argument("--sequence-length", type=int, default=None)
    args, beam_args = parser.parse_known_args(argv)
    lines = count_lines(args.input)
    step = -(-lines // args.splits) or 1
    ranges = [(begin, min(begin + step, lines + 1)) for begin in range(1, lines + 1, step)]
    handler = KeyedModelHandler(KbzModelHandler(args.model, sequence_length=args.sequence_length))
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        _ = (
            pipeline
            | "ranges" >> beam.Create(ranges)
            | "read" >> beam.FlatMap(lambda r: read_range(args.input, *r))
            | "shuffle" >> beam.Reshuffle()  # spread the lines over the workers
            | "embed" >> RunInference(handler)
            | "json"
            >> beam.MapTuple(lambda n, r: json.dumps({"line": n, "vector": r.inference.tolist()}))
            | "write"
            >> beam.io.WriteToText(args.output, file_name_suffix=".jsonl", num_shards=args.shards)
        )


if __name__ == "__main__":
    main()
