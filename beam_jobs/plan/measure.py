"""How many output bytes and records one input byte becomes, measured on the samples by the
writers' own path (the format's reader, the projection, our encoder, TFRecord framing and the
shards' compression), and with splits each split's share of the output."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from beam_jobs.codec.examples import ExampleEncoder
from beam_jobs.codec.framing import RECORD_OVERHEAD_BYTES
from beam_jobs.codec.shard_file import ShardFileWriter, SizeOnly
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.formats.base import InputFormat, OnBadRow, Sample
from beam_jobs.schema.projection import Projection
from beam_jobs.schema.split_hash import SplitRule
from tfdata_reader.manifest import FeatureSpec

__all__ = ["Measured", "measure", "skewed"]


@dataclasses.dataclass(frozen=True)
class Measured:
    """Output bytes and records per input byte; with splits, each split's share of the output
    bytes (in the splits' order)."""

    output_bytes_per_input_byte: float
    records_per_input_byte: float
    split_shares: tuple[float, ...] = ()
    framed_bytes_per_input_byte: float = 0.0  # before compression


def measure(
    input_format: InputFormat,
    samples: Sequence[Sample],
    features: Sequence[FeatureSpec],
    projection: Projection,
    sharding: ShardingOptions,
    on_bad_row: OnBadRow,
    split_rule: SplitRule | None = None,
) -> Measured:
    """Converts the samples like a writer does. A split's share is its weight's, unless the
    sampled records surely split otherwise (a --split_key with few values, or repeated
    records, need not follow the weights), then the sample's."""
    encoder = ExampleEncoder(projection.features(features))
    in_bytes = out_bytes = records = framed_total = 0.0
    weights = [s.weight for s in split_rule.splits] if split_rule else []
    split_bytes = np.zeros(len(weights))
    split_records = np.zeros(len(weights))
    for sample in samples:
        read = input_format.sample_batches(sample, features, on_bad_row)
        batches = [projection.batch(batch) for batch in read]
        encoded = [encoder.encode(batch) for batch in batches]
        # One write of all the sample's records: the same bytes as a shard of them.
        shard = ShardFileWriter(SizeOnly(), sharding.compression, sharding.gzip_level)
        shard.write_records([record for examples in encoded for record in examples])
        shard.close()
        in_bytes += sample.input_bytes
        out_bytes += shard.bytes
        framed_total += shard.framed_bytes
        records += shard.records
        for batch, examples in zip(batches, encoded, strict=True):
            if split_rule and batch.num_rows:
                sizes = np.fromiter(map(len, examples), np.float64, len(examples))
                which = split_rule.which(batch)
                framed = sizes + RECORD_OVERHEAD_BYTES
                split_bytes += np.bincount(which, framed, minlength=len(weights))
                split_records += np.bincount(which, minlength=len(weights))
    shares = [w / sum(weights) for w in weights]
    if skewed(split_records, shares):
        shares = list(split_bytes / split_bytes.sum())
    if in_bytes == 0:
        return Measured(1.0, 0.0, tuple(shares), 1.0)
    ratio = framed_total / in_bytes
    return Measured(out_bytes / in_bytes, records / in_bytes, tuple(shares), ratio)


def skewed(records: np.ndarray, weights: Sequence[float]) -> bool:
    """Whether the sampled records' splits are surely not the weights' shares (more than four
    standard errors off for some split): then the sample's shares size the shards. Else the
    weights do, as the sample's own noise would size a small split's shards wrongly."""
    total = records.sum()
    if not total:
        return False
    shares = np.asarray(weights)
    error = np.sqrt(shares * (1 - shares) / total)
    return bool((np.abs(records / total - shares) > 4 * error + 1e-12).any())
