"""Builds the conversion plan at pipeline construction time, from input metadata and samples.

Lists the inputs (Beam `FileSystems`, so local paths and gs:// work alike), asks the input
format where each file may be cut, reads the head of a few files, infers the feature spec,
measures how many output bytes one input byte becomes (by converting and encoding the sample
exactly as the writers will), and cuts the inputs into shards, per split with --splits. Only
the sampled heads are read; the cost does not grow with the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.errors import DataError, UsageError
from beam_jobs.formats import InputFormat, Sample, make_format
from beam_jobs.formats.base import OnBadRow
from beam_jobs.options import ConvertConfig
from beam_jobs.plan.inputs import list_inputs
from beam_jobs.plan.shards import (
    InputFile,
    ShardSpec,
    choose_num_shards,
    plan_shards,
    plan_split_tasks,
)
from beam_jobs.schema.projection import Projection
from beam_jobs.schema.splits import assign_splits
from beam_jobs.schema.tfmd import schema_from_pbtxt
from beam_jobs.sink.dead_letter import BadRow
from beam_jobs.sink.deflate import gzip_bytes
from beam_jobs.sink.encode import ExampleEncoder
from beam_jobs.sink.tfrecord import frame_records
from tfdata_reader.manifest import FeatureSpec, ManifestError, schema_from_json

__all__ = ["ConversionPlan", "make_plan"]

MAX_SAMPLED_FILES = 8


@dataclasses.dataclass(frozen=True)
class ConversionPlan:
    """What a conversion will do, decided before any worker starts."""

    files: tuple[InputFile, ...]
    features: tuple[FeatureSpec, ...]  # the output's (what the manifest lists)
    shards: tuple[ShardSpec, ...]
    output_bytes_per_input_byte: float
    records_per_input_byte: float
    input_format: InputFormat
    splits: tuple[tuple[str, int], ...] = ()
    read_features: tuple[FeatureSpec, ...] = ()  # the inputs' columns, as the readers parse them
    projection: Projection = dataclasses.field(default_factory=Projection)
    # Sampled rows that would go to the dead letter: how many, and the first few as
    # `file: reason` (a plan of 0 records says why).
    requested_shards: int | None = None  # --num_shards
    sampled_bad_rows: int = 0
    sampled_bad_examples: tuple[str, ...] = ()
    # With splits, the write tasks: each reads its stretch of the input once and writes a part
    # of one shard per split. Without, each shard is its own task.
    split_tasks: tuple[ShardSpec, ...] = ()
    split_shares: tuple[float, ...] = ()  # each split's sampled share of the output bytes

    @property
    def tasks(self) -> tuple[ShardSpec, ...]:
        """What the writers do: one element per write task."""
        return self.split_tasks or self.shards

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def estimated_output_bytes(self) -> float:
        return self.input_bytes * self.output_bytes_per_input_byte

    @property
    def estimated_records(self) -> float:
        return self.input_bytes * self.records_per_input_byte

    def files_json(self) -> list[dict[str, Any]]:
        """The input files as the manifest records them, and rerun detection compares: path,
        size and modification time (a file edited in place is a new input)."""
        return [{"path": f.path, "bytes": f.size, "modified": f.modified} for f in self.files]

    def shards_per_split(self) -> dict[str | None, int]:
        """Planned shards of each split (None: the only key without splits), in split order."""
        counts: dict[str | None, int] = {name: 0 for name, _ in self.splits} or {None: 0}
        for shard in self.shards:
            counts[shard.split] += 1
        return counts


def _spread(files: Sequence[InputFile], count: int) -> list[InputFile]:
    """Up to `count` files evenly spaced through the list, always including the first."""
    if len(files) <= count:
        return list(files)
    return [files[i * (len(files) - 1) // (count - 1)] for i in range(count)]


def _load_schema(path: str | None) -> list[FeatureSpec]:
    if path is None:
        return []
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"--schema {path}: cannot be read: {e}") from None
    try:
        if path.endswith(".json") or text.lstrip()[:1] in (b"{", b"["):
            return schema_from_json(text, source=path)
        return schema_from_pbtxt(text, source=path)  # TFX's format (TFDV, schema.pbtxt)
    except ManifestError as e:  # the user's file: a usage error (exit 2), like an unreadable one
        raise UsageError(f"--schema {e}") from None


def _measure(
    input_format: InputFormat,
    samples: Sequence[Sample],
    features: Sequence[FeatureSpec],
    projection: Projection,
    compression: str,
    compression_level: int,
    on_bad_row: OnBadRow,
    splits: Sequence[tuple[str, int]] = (),
    split_key: str | None = None,
) -> tuple[float, float, list[float]]:
    """Output bytes and records per input byte, by converting the samples like a writer does,
    and with splits each split's share of the output: its weight's, unless the sampled records
    surely split otherwise (a --split_key with few values, or repeated records, need not
    follow the weights), then the sample's."""
    encoder = ExampleEncoder(projection.features(features))
    in_bytes = out_bytes = records = 0.0
    weights = [w for _, w in splits]
    split_bytes = np.zeros(len(weights))
    split_records = np.zeros(len(weights))
    for sample in samples:
        read = input_format.sample_batches(sample, features, on_bad_row)
        batches = [projection.batch(batch) for batch in read]
        encoded = [encoder.encode(batch) for batch in batches]
        framed = b"".join(frame_records(examples) for examples in encoded)
        stored = gzip_bytes(framed, compression_level) if compression == "gzip" else framed
        in_bytes += sample.input_bytes
        out_bytes += len(stored)
        records += sum(batch.num_rows for batch in batches)
        for batch, examples in zip(batches, encoded, strict=True):
            if weights and batch.num_rows:
                sizes = np.fromiter(map(len, examples), np.float64, len(examples))
                which = assign_splits(batch, weights, split_key)
                split_bytes += np.bincount(which, sizes + 16, minlength=len(weights))
                split_records += np.bincount(which, minlength=len(weights))
    shares = [w / sum(weights) for w in weights]
    if _skewed(split_records, shares):
        shares = list(split_bytes / split_bytes.sum())
    if in_bytes == 0:
        return 1.0, 0.0, shares
    return out_bytes / in_bytes, records / in_bytes, shares


def _skewed(records: np.ndarray, weights: Sequence[float]) -> bool:
    """Whether the sampled records' splits are surely not the weights' shares (more than four
    standard errors off for some split): then the sample's shares size the shards. Else the
    weights do, as the sample's own noise would size a small split's shards wrongly."""
    total = records.sum()
    if not total:
        return False
    shares = np.asarray(weights)
    error = np.sqrt(shares * (1 - shares) / total)
    return bool((np.abs(records / total - shares) > 4 * error + 1e-12).any())


def _check_split_key(config: ConvertConfig, features: Sequence[FeatureSpec]) -> None:
    names = [f.name for f in features]
    if config.split_key and config.split_key not in names:
        raise UsageError(f"--split_key {config.split_key!r} is not a feature; features: {names}")


def _check_label(config: ConvertConfig, features: Sequence[FeatureSpec]) -> None:
    by_name = {f.name: f for f in features}
    if config.label is None:
        return
    label = by_name.get(config.label)
    if label is None:
        raise UsageError(f"--label {config.label!r} is not a feature; features: {list(by_name)}")
    if label.shape != [] or label.dtype == "float32":
        raise UsageError(
            f"--label {config.label!r} must hold one integer or text value per record; it is "
            f"{label.dtype} with shape {label.shape}"
        )


def make_plan(config: ConvertConfig) -> ConversionPlan:
    """Lists, samples and plans a conversion.

    Raises:
      UsageError: for inputs that match nothing or a --split_key that is not a feature.
      DataError: for an empty input file or a sampled file that is not of the format.
    """
    input_format = make_format(
        config.format, config.inputs, config.labels, config.max_record_bytes, config.dialect()
    )
    files = input_format.list_files(list_inputs(config.inputs, exclude=config.output or None))
    empty = [f.path for f in files if f.size == 0]
    if empty and input_format.name != "images":  # an empty image is dead-lettered instead
        # A 0-byte input is usually an upstream export that failed.
        raise DataError(
            f"{len(empty)} input file(s) are empty (0 bytes): "
            f"{', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''}; remove them from --input"
        )
    files = input_format.with_cuts(files, config.target_shard_bytes)
    samples = [
        input_format.sample(f, config.sample_bytes) for f in _spread(files, MAX_SAMPLED_FILES)
    ]
    if config.columns:
        input_format.keep_columns(config.columns)
    read_features = input_format.infer_features(samples, _load_schema(config.schema))
    projection = config.projection()
    features = projection.features(read_features)
    _check_split_key(config, features)
    _check_label(config, features)
    bad: list[BadRow] = []
    out_ratio, records_ratio, shares = _measure(
        input_format,
        samples,
        read_features,
        projection,
        config.compression,
        config.compression_level,
        bad.append,
        config.splits,
        config.split_key,
    )
    input_bytes = sum(f.size for f in files)
    counts = []
    for (split, _), share in zip(config.splits or ((None, 1),), shares or [1.0], strict=True):
        num_shards = choose_num_shards(
            input_bytes * out_ratio * share,
            config.target_shard_bytes,
            max(1.0, input_bytes * records_ratio * share),
            config.num_shards,
        )
        counts.append((split, num_shards))
    tasks: list[ShardSpec] = []
    if config.splits:
        shards, tasks = plan_split_tasks(files, counts)
    else:
        shards = plan_shards(files, counts[0][1])
    return ConversionPlan(
        files=tuple(files),
        features=tuple(features),
        shards=tuple(shards),
        output_bytes_per_input_byte=out_ratio,
        records_per_input_byte=records_ratio,
        input_format=input_format,
        splits=config.splits,
        read_features=tuple(read_features),
        projection=projection,
        requested_shards=config.num_shards,
        sampled_bad_rows=len(bad),
        sampled_bad_examples=tuple(f"{b.path}: {b.reason}" for b in bad[:3]),
        split_tasks=tuple(tasks),
        split_shares=tuple(shares) if config.splits else (),
    )
