"""The common hand-written Beam job we compare against: ReadFromText | Map(build Example) |
WriteToTFRecord, one Python `tf.train.Example` per row.

    python benchmarks/plain_beam.py INPUT_GLOB OUTPUT_PREFIX NUM_SHARDS [beam flags]
"""

from __future__ import annotations

import csv
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

INT_COLUMNS = ("id", "label", "count", "bucket")
FLOAT_COLUMNS = ("f0", "f1", "f2", "f3")
NAMES = ("id", "label", "count", "bucket", "f0", "f1", "f2", "f3", "word", "code", "text")


class ToExample(beam.DoFn):
    def setup(self) -> None:
        import tensorflow as tf

        self._tf = tf

    def process(self, line: str):
        tf = self._tf
        values = next(csv.reader([line]))
        feature = {}
        for name, value in zip(NAMES, values, strict=True):
            if name in INT_COLUMNS:
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
            elif name in FLOAT_COLUMNS:
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
    with beam.Pipeline(options=PipelineOptions(beam_args)) as p:
        (
            p
            | beam.io.ReadFromText(pattern, skip_header_lines=1)
            | beam.ParDo(ToExample())
            | beam.io.WriteToTFRecord(prefix, num_shards=int(shards))
        )


if __name__ == "__main__":
    main()
