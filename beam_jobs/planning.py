"""Builds the conversion plan at pipeline construction time, from input metadata and samples.

Lists the inputs (Beam `FileSystems`, so local paths and gs:// work alike), reads the head of a
few files, infers the feature spec, measures how many output bytes one input byte becomes (by
encoding the sample exactly as the writers will), and cuts the inputs into shards. Only the
sampled heads are read; the cost does not grow with the data.
"""

from __future__ import annotations

import dataclasses
import io
import zlib
from collections.abc import Sequence

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs import csv_source
from beam_jobs.example_encoding import ExampleEncoder
from beam_jobs.options import ConvertConfig, UsageError
from beam_jobs.shard_plan import InputFile, ShardSpec, choose_num_shards, plan_shards
from beam_jobs.tfrecord_format import GZIP_LEVEL, frame_records
from tfdata_reader.manifest import FeatureSpec, schema_from_json

__all__ = ["ConversionPlan", "list_inputs", "make_plan", "read_head"]

MAX_SAMPLED_FILES = 8


@dataclasses.dataclass(frozen=True)
class ConversionPlan:
    """What a conversion will do, decided before any worker starts."""

    files: tuple[InputFile, ...]
    features: tuple[FeatureSpec, ...]
    shards: tuple[ShardSpec, ...]
    output_bytes_per_input_byte: float
    records_per_input_byte: float

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def estimated_output_bytes(self) -> float:
        return self.input_bytes * self.output_bytes_per_input_byte

    @property
    def estimated_records(self) -> float:
        return self.input_bytes * self.records_per_input_byte


def list_inputs(patterns: Sequence[str]) -> list[InputFile]:
    """Expands glob patterns into files sorted by path; every pattern must match something.

    Raises:
      UsageError: naming a pattern that matches no file.
    """
    files: dict[str, int] = {}
    for pattern, result in zip(patterns, FileSystems.match(list(patterns))):
        if not result.metadata_list:
            raise UsageError(f"--input {pattern!r} matches no files")
        for meta in result.metadata_list:
            files[meta.path] = meta.size_in_bytes
    return [InputFile(path, size) for path, size in sorted(files.items())]


def read_head(path: str, num_bytes: int) -> bytes:
    """The first `num_bytes` bytes of a file, as stored."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read(num_bytes)


def _spread(files: Sequence[InputFile], count: int) -> list[InputFile]:
    """Up to `count` files evenly spaced through the list, always including the first."""
    if len(files) <= count:
        return list(files)
    return [files[i * (len(files) - 1) // (count - 1)] for i in range(count)]


def _load_schema(path: str | None) -> list[FeatureSpec]:
    if path is None:
        return []
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return schema_from_json(f.read(), source=path)


def _measure(
    samples: Sequence[csv_source.CsvSample],
    features: Sequence[FeatureSpec],
    compression: str,
) -> tuple[float, float]:
    """Output bytes and records per input byte, by converting the samples like a writer does."""
    encoder = ExampleEncoder(features)
    in_bytes = out_bytes = records = 0
    for sample in samples:
        batches = csv_source.read_range(
            io.BytesIO(sample.data), sample.path, 0, len(sample.data), features, lambda row: None
        )
        framed = b"".join(frame_records(encoder.encode(batch)) for batch in batches)
        stored = zlib.compress(framed, GZIP_LEVEL) if compression == "gzip" else framed
        in_bytes += len(sample.data)
        out_bytes += len(stored)
        records += sample.table.num_rows
    if in_bytes == 0:
        return 1.0, 0.0
    return out_bytes / in_bytes, records / in_bytes


def make_plan(config: ConvertConfig) -> ConversionPlan:
    """Lists, samples and plans a conversion.

    Raises:
      UsageError: for inputs that match nothing.
      csv_source.CsvDataError: for an empty input file or a sampled file that is not CSV.
    """
    files = list_inputs(config.inputs)
    empty = [f.path for f in files if f.size == 0]
    if empty:
        # A 0-byte CSV has not even a header: usually an upstream export that failed.
        raise csv_source.CsvDataError(
            f"{len(empty)} input file(s) are empty (0 bytes, not even a header line): "
            f"{', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''}; remove them from --input"
        )
    samples = []
    for f in _spread(files, MAX_SAMPLED_FILES):
        head = read_head(f.path, config.sample_bytes)
        samples.append(csv_source.parse_sample(f.path, head, is_whole_file=len(head) >= f.size))
    features = csv_source.infer_features(samples, _load_schema(config.schema))
    out_ratio, records_ratio = _measure(samples, features, config.compression)
    input_bytes = sum(f.size for f in files)
    num_shards = choose_num_shards(
        input_bytes * out_ratio,
        config.target_shard_bytes,
        max(1.0, input_bytes * records_ratio),
        config.num_shards,
    )
    return ConversionPlan(
        files=tuple(files),
        features=tuple(features),
        shards=tuple(plan_shards(files, num_shards)),
        output_bytes_per_input_byte=out_ratio,
        records_per_input_byte=records_ratio,
    )
