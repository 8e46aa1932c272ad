"""`WriteShards`: balanced, size-targeted shards and a manifest from any PCollection.

For teams with their own Beam pipeline: the elements may be dicts (`{feature: value or list}`,
nested dicts flattened to dotted names), Arrow `RecordBatch`es, or serialized `tf.train.Example`
bytes. The feature spec is given or inferred from a sample; elements are batched, conformed and
encoded by tfx-bsl; the total size decides the shard count; each record goes to the shard that
has the fewest bytes so far in its bundle; every shard is written under a temporary name and
published by the same `PublishShards` step as `convert`. Rows that contradict the spec go to
the dead letter, and `max_bad_fraction` applies, as in `convert`.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import google_crc32c
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from beam_jobs.errors import DataError, UsageError
from beam_jobs.options import (
    DEFAULT_MAX_BAD_FRACTION,
    DEFAULT_SHARD_PREFIX,
    DEFAULT_TARGET_SHARD_BYTES,
)
from beam_jobs.plan.shards import choose_num_shards
from beam_jobs.schema import conform as arrow_conform
from beam_jobs.schema.rows import flatten_object, infer_from_rows
from beam_jobs.sink.dead_letter import BadRow, as_text, write_dead_letter
from beam_jobs.sink.encode import ExampleEncoder, decode_examples
from beam_jobs.sink.output_dir import TEMP_DIR_PREFIX
from beam_jobs.sink.publish import PublishShards, PublishSpec, WrittenShard
from beam_jobs.sink.shard_writer import METRICS_NAMESPACE
from beam_jobs.sink.tfrecord import RECORD_OVERHEAD_BYTES, ShardFileWriter
from beam_jobs.units import parse_size
from tfdata_reader.manifest import COMPRESSIONS, NAME_RULE, FeatureSpec, is_valid_name, shard_name

__all__ = ["WriteShards", "infer_spec"]

SAMPLE_SIZE = 1000
_SOURCE = "<pcollection>"
_WRITE_CHUNK = 4096


def _to_table(elements: Sequence[Any]) -> pa.Table:
    """A batch of dicts or record batches as one flattened table."""
    first = elements[0]
    if isinstance(first, pa.RecordBatch):
        table = pa.Table.from_batches(list(elements))
    elif isinstance(first, dict):
        table = pa.Table.from_pylist(list(elements))
    else:
        raise TypeError(
            "WriteShards takes dicts, pyarrow.RecordBatch or serialized tf.train.Example bytes; "
            f"got {type(first).__name__}"
        )
    return arrow_conform.flatten_structs(table)


def infer_spec(sample: Sequence[Any]) -> list[FeatureSpec]:
    """The feature spec of sampled elements (dicts, record batches or serialized Examples).

    Raises:
      DataError: when the sample is empty or its values cannot be Example features.
    """
    if not sample:
        raise DataError("WriteShards got an empty PCollection and no features to describe it")
    if isinstance(sample[0], bytes):
        return arrow_conform.infer_from_table(
            pa.Table.from_batches([decode_examples(sample)]), scalar_lists=True
        )
    if isinstance(sample[0], dict):
        # Like JSON lines: a key with values of several types takes the type most rows have.
        return infer_from_rows([flatten_object(row) for row in sample], "WriteShards sample")
    try:
        return arrow_conform.infer_from_table(_to_table(sample))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise DataError(f"WriteShards: cannot infer a feature spec from the sample: {e}") from e


def _cells(row: dict) -> dict:
    return {k: as_text(v) if isinstance(v, bytes) else v for k, v in row.items()}


def _flat(element: Any) -> dict:
    return element if isinstance(element, dict) else {"batch_rows": element.num_rows}


class _EncodeFn(beam.DoFn):
    """Batches of elements -> serialized Examples; bad rows and missing-value counts aside."""

    BAD = "bad"
    MISSING = "missing"

    def __init__(self, features: Sequence[FeatureSpec] | None) -> None:
        self._fixed = tuple(features) if features else None
        self._features: tuple[FeatureSpec, ...] = ()
        self._bad_counter = Metrics.counter(METRICS_NAMESPACE, "records_dead_lettered")

    @staticmethod
    def _conform(
        elements: list, features: Sequence[FeatureSpec]
    ) -> tuple[pa.RecordBatch, dict[int, str]]:
        """Conformed good rows and {index: reason}; one element at a time only when the batch
        does not even make one table (a value of another type than the rest)."""
        try:
            return arrow_conform.conform(_to_table(elements), features)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
        good, bad = [], {}
        for index, element in enumerate(elements):
            try:
                batch, problems = arrow_conform.conform(_to_table([element]), features)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                problems = {0: str(e)}
            if problems:
                bad[index] = problems[0]
            else:
                good.append(batch)
        if not good:  # no columns and no rows: conform makes every feature an empty column
            return arrow_conform.conform(pa.table({}), features)[0], bad
        return pa.Table.from_batches(good).combine_chunks().to_batches()[0], bad

    def process(self, elements: list, spec: list[FeatureSpec] | None = None) -> Iterator[Any]:
        features = self._fixed or tuple(spec)
        if features != self._features:
            self._features, self._encoder = features, ExampleEncoder(features)
        if isinstance(elements[0], bytes):
            batch, bad = arrow_conform.conform(decode_examples(elements), features)
            rows = [{"raw": as_text(elements[i])} for i in sorted(bad)]
            records = [e for i, e in enumerate(elements) if i not in bad]
        else:
            batch, bad = self._conform(elements, features)
            rows = [{"cells": _cells(_flat(elements[i]))} for i in sorted(bad)]
            records = self._encoder.encode(batch)
        for (index, reason), content in zip(sorted(bad.items()), rows):
            yield beam.pvalue.TaggedOutput(
                self.BAD, BadRow(_SOURCE, 0, 0, reason, index, content).to_json()
            )
        self._bad_counter.inc(len(bad))
        missing = {f.name: arrow_conform.missing_count(batch.column(f.name)) for f in features}
        yield beam.pvalue.TaggedOutput(self.MISSING, missing)
        yield from records


def _framed_size(record: bytes) -> tuple[int, int]:
    return len(record) + RECORD_OVERHEAD_BYTES, 1


def _shard_count(totals: tuple[int, int], target: int, forced: int | None) -> int:
    return choose_num_shards(totals[0], target, totals[1], forced)


class _PickShardFn(beam.DoFn):
    """Sends each record to the shard that has the fewest bytes so far in this bundle.

    A hash of each record balances shards only statistically: with about 550 records per shard,
    one test run here put the largest shard 13% over its 48 KiB target (tfx-bsl encodes a
    record's features in a different order each time, so its hash differs between runs).
    Filling the lightest shard keeps a bundle's shards within one record of each other whatever
    the data's order or periodicity. Ties go round the shards from an offset the bundle's first
    record picks, so that many small bundles do not all begin with shard 0.
    """

    def start_bundle(self) -> None:
        self._loads: list[tuple[int, int, int]] | None = None  # heap of (bytes, rank, shard)

    def process(self, record: bytes, num_shards: int) -> Iterator[tuple[int, bytes]]:
        if self._loads is None:
            offset = google_crc32c.value(record) % num_shards
            self._loads = [(0, (s - offset) % num_shards, s) for s in range(num_shards)]
            heapq.heapify(self._loads)
        load, rank, shard = self._loads[0]
        heapq.heapreplace(self._loads, (load + _framed_size(record)[0], rank, shard))
        yield shard, record


def _every_index(num_shards: int) -> Iterator[tuple[int, None]]:
    """One empty marker per shard index, so that a shard no record chose is written too."""
    return ((index, None) for index in range(num_shards))


class _WriteGroupFn(beam.DoFn):
    """Writes the records grouped under one shard index to a temporary file.

    Shard 0 also carries what is not any one shard's: the dead letter of every bad element and
    the missing-value counts of all records.
    """

    def __init__(self, temp_dir: str, prefix: str, compression: str) -> None:
        self._temp_dir, self._prefix, self._compression = temp_dir, prefix, compression
        self._records = Metrics.counter(METRICS_NAMESPACE, "records_written")
        self._bytes = Metrics.counter(METRICS_NAMESPACE, "bytes_written")
        self._shards = Metrics.counter(METRICS_NAMESPACE, "shards_written")

    def process(
        self,
        group: tuple[int, Any],
        num_shards: int,
        bad_rows: list[dict],
        missing: list[dict[str, int]],
    ) -> Iterator[WrittenShard]:
        index, records = group
        name = shard_name(self._prefix, index, num_shards, self._compression)
        temp_path = FileSystems.join(self._temp_dir, f"{name}.{uuid.uuid4().hex}")
        raw = FileSystems.create(temp_path, compression_type=CompressionTypes.UNCOMPRESSED)
        with ShardFileWriter(raw, self._compression) as writer:
            chunk: list[bytes] = []
            for record in records:
                if record is None:
                    continue  # the marker of `_every_index`
                chunk.append(record)
                if len(chunk) == _WRITE_CHUNK:
                    writer.write_records(chunk)
                    chunk = []
            writer.write_records(chunk)
        first = index == 0
        dead_letter = None
        if first and bad_rows:
            dead_letter = write_dead_letter(self._temp_dir, name, bad_rows)
        self._records.inc(writer.records)
        self._bytes.inc(writer.bytes)
        self._shards.inc()
        yield WrittenShard(
            index=index,
            temp_path=temp_path,
            name=name,
            records=writer.records,
            bytes=writer.bytes,
            crc32c=writer.crc32c,
            input_bytes=0,
            null_counts=_sum_counts(missing) if first else {},
            bad_records=len(bad_rows) if first else 0,
            dead_letter_temp_path=dead_letter,
            num_shards=num_shards,
        )


def _sum_counts(counts: Sequence[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in counts:
        for name, count in part.items():
            total[name] = total.get(name, 0) + count
    return total


class WriteShards(beam.PTransform):
    """Writes a PCollection as size-targeted TFRecord shards plus `manifest.json`.

    Example:
        rows | WriteShards("gs://bucket/ds", target_shard_bytes="256MiB", compression="gzip")

    Args:
      output_dir: where the shards, `dead_letter/` and `manifest.json` go (local or gs://).
      target_shard_bytes: wanted size of one shard (an int or "256MiB"); sized on the
        uncompressed records, so GZIP shards come out smaller.
      compression: "none" or "gzip".
      features: the feature spec; default: inferred from a sample of `sample_size` elements.
      shard_prefix: shard file name prefix (ASCII letters, digits, '_' and '.').
      num_shards: write exactly this many shards instead of sizing them.
      max_bad_fraction: the largest share of rows that may fail to convert.

    Raises:
      UsageError: for a bad argument, at construction.

    Output: a PCollection holding the published `Manifest`.
    """

    def __init__(
        self,
        output_dir: str,
        *,
        target_shard_bytes: int | str = DEFAULT_TARGET_SHARD_BYTES,
        compression: str = "none",
        features: Sequence[FeatureSpec] | None = None,
        shard_prefix: str = DEFAULT_SHARD_PREFIX,
        num_shards: int | None = None,
        max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION,
        sample_size: int = SAMPLE_SIZE,
    ) -> None:
        super().__init__()
        if compression not in COMPRESSIONS:
            raise UsageError(
                f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}"
            )
        if not is_valid_name(shard_prefix):
            raise UsageError(f"shard_prefix may hold only {NAME_RULE}, got {shard_prefix!r}")
        if num_shards is not None and num_shards < 1:
            raise UsageError(f"num_shards must be at least 1, got {num_shards}")
        if not 0.0 <= max_bad_fraction <= 1.0:
            raise UsageError(f"max_bad_fraction must be between 0 and 1, got {max_bad_fraction}")
        try:
            self._target = parse_size(target_shard_bytes)
        except ValueError as e:
            raise UsageError(f"target_shard_bytes: {e}") from None
        self._output = output_dir.rstrip("/")
        self._compression = compression
        self._features = tuple(features) if features else None
        self._prefix = shard_prefix
        self._num_shards = num_shards
        self._max_bad_fraction = max_bad_fraction
        self._sample_size = sample_size
        self._temp_dir = FileSystems.join(self._output, TEMP_DIR_PREFIX + uuid.uuid4().hex[:12])

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        spec = self._spec(pcoll)  # None when the features were given
        encoded = (
            pcoll
            | "Batch" >> beam.BatchElements(min_batch_size=64, max_batch_size=4096)
            # Serialized Examples; tagged: bad rows' dead-letter objects, missing-value counts.
            | "Encode"
            >> beam.ParDo(_EncodeFn(self._features), spec=spec).with_outputs(
                _EncodeFn.BAD, _EncodeFn.MISSING, main="records"
            )
        )
        records = encoded.records
        num_shards = beam.pvalue.AsSingleton(
            records
            | "FramedSizes" >> beam.Map(_framed_size)
            | "Total" >> beam.CombineGlobally(beam.combiners.TupleCombineFn(sum, sum))
            | "ChooseShardCount"
            >> beam.Map(_shard_count, target=self._target, forced=self._num_shards)
        )
        markers = (
            pcoll.pipeline
            | "One" >> beam.Create([None])
            | "EveryShardIndex" >> beam.FlatMap(lambda _, n: _every_index(n), n=num_shards)
        )
        picked = records | "PickShard" >> beam.ParDo(_PickShardFn(), num_shards=num_shards)
        return (
            (picked, markers)
            | "WithEveryIndex" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            # One temporary shard per index: `WrittenShard`s.
            | "WriteShards"
            >> beam.ParDo(
                _WriteGroupFn(self._temp_dir, self._prefix, self._compression),
                num_shards=num_shards,
                bad_rows=beam.pvalue.AsList(encoded[_EncodeFn.BAD]),
                missing=beam.pvalue.AsList(encoded[_EncodeFn.MISSING]),
            )
            | "Publish" >> PublishShards(self._publish_spec(), features=spec)
        )

    def _spec(self, pcoll: beam.PCollection) -> Any:
        if self._features:
            return None
        return beam.pvalue.AsSingleton(
            pcoll
            | "SampleForSpec" >> beam.combiners.Sample.FixedSizeGlobally(self._sample_size)
            | "InferSpec" >> beam.Map(infer_spec)
        )

    def _publish_spec(self) -> PublishSpec:
        return PublishSpec(
            output=self._output,
            temp_dir=self._temp_dir,
            prefixes=(self._prefix,),
            max_bad_fraction=self._max_bad_fraction,
            compression=self._compression,
            inputs={"source": "WriteShards"},
            options={
                "target_shard_bytes": self._target,
                "compression": self._compression,
                "shard_prefix": self._prefix,
                "num_shards": self._num_shards,
                "max_bad_fraction": self._max_bad_fraction,
            },
            features=self._features,
        )
