"""The common hand-written Beam job we compare against: ReadFromText | Map(build Example) |
WriteToTFRecord, one Python `tf.train.Example` per row.

    python benchmarks/plain_beam.py INPUT_GLOB OUTPUT_PREFIX NUM_SHARDS [--types ifs..] [beam flags]

Without --types the columns are benchmarks/data.py's 11 (4 int, 4 float, 3 text); with it, the
first file's header names them and --types gives one letter each (i int, f float, s text), as
a hand-written job knows its columns.
"""

from __future__ import annotations

import csv
import glob
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

NAMES = ("id", "label", "count", "bucket", "f0", "f1", "f2", "f3", "word", "code", "text")
TYPES = "iiiiffffsss"


class ToExample(beam.DoFn):
    def __init__(self, names: tuple[str, ...], types: str) -> None:
        self._columns = list(zip(names, types, strict=True))

    def setup(self) -> None:
        import tensorflow as tf

        self._tf = tf

    def process(self, line: str):
        tf = self._tf
        values = next(csv.reader([line]))
        feature = {}
        for (name, kind), value in zip(self._columns, values, strict=True):
            if kind == "i":
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
            elif kind == "f":
                feature[name] = tf.train.Feature(
                    float_list=tf.train.FloatList(value=[float(value)])
                )
            else:
                feature[name] = tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[value.encode("utf-8")])
                )
        yield tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def main() -> None:
    pattern, prefix, shards, *beam_args = sys.argv[1:]
    names, types = NAMES, TYPES
    if beam_args[:1] == ["--types"]:
        types, beam_args = beam_args[1], beam_args[2:]
        with open(sorted(glob.glob(pattern))[0], newline="") as f:
            names = tuple(next(csv.reader(f)))
    with beam.Pipeline(options=PipelineOptions(beam_args)) as p:
        (
            p
            | beam.io.ReadFromText(pattern, skip_header_lines=1)
            | beam.ParDo(ToExample(names, types))
            | beam.io.WriteToTFRecord(prefix, num_shards=int(shards))
        )


if __name__ == "__main__":
    main()
