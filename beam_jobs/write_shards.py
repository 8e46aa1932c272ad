"""`WriteShards`: balanced, size-targeted shards and a manifest from any PCollection.

For teams with their own Beam pipeline: the elements may be dicts (`{feature: value or list}`,
nested dicts flattened to dotted names), Arrow `RecordBatch`es, or serialized `tf.train.Example`
bytes. The feature spec is given or inferred from a sample; elements are batched, conformed and
encoded by tfx-bsl; the total size decides the shard count; each record goes to the shard its
CRC32C picks (deterministic and balanced); every shard is written under a temporary name and
published with the same manifest `convert` writes. Rows that contradict the spec go to the dead
letter, and `max_bad_fraction` applies, as in `convert`.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import google_crc32c
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.errors import DataError
from beam_jobs.formats.jsonl import flatten_object, infer_from_rows
from beam_jobs.options import DEFAULT_MAX_BAD_FRACTION
from beam_jobs.plan.shards import choose_num_shards
from beam_jobs.schema import conform as arrow_conform
from beam_jobs.sink.dead_letter import BadRow, as_text
from beam_jobs.sink.encode import ExampleEncoder
from beam_jobs.sink.output_dir import TEMP_DIR_PREFIX
from beam_jobs.sink.publish import publish
from beam_jobs.sink.shard_writer import WrittenShard
from beam_jobs.sink.tfrecord import ShardFileWriter
from beam_jobs.units import parse_size
from beam_jobs.version import __version__
from tfdata_reader.manifest import FeatureSpec, shard_name

__all__ = ["WriteShards", "infer_spec"]

SAMPLE_SIZE = 1000


_SOURCE = "<pcollection>"


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


def _decode(records: Sequence[bytes]) -> pa.RecordBatch:
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    return ExamplesToRecordBatchDecoder().DecodeBatch(list(records))


def infer_spec(sample: Sequence[Any]) -> list[FeatureSpec]:
    """The feature spec of sampled elements (dicts, record batches or serialized Examples).

    Raises:
      DataError: when the sample is empty or its values cannot be Example features.
    """
    if not sample:
        raise DataError("WriteShards got an empty PCollection and no features to describe it")
    if isinstance(sample[0], bytes):
        return arrow_conform.infer_from_table(
            pa.Table.from_batches([_decode(sample)]), scalar_lists=True
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


class _EncodeFn(beam.DoFn):
    """Batches of elements -> serialized Examples; bad rows and missing-value counts aside."""

    BAD = "bad"
    MISSING = "missing"

    def __init__(self, features: Sequence[FeatureSpec] | None) -> None:
        self._fixed = tuple(features) if features else None
        self._features: tuple[FeatureSpec, ...] = ()

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
            table = _decode(elements)
            batch, bad = arrow_conform.conform(table, features)
            rows = [{"raw": as_text(elements[i])} for i in sorted(bad)]
            records = [e for i, e in enumerate(elements) if i not in bad]
        else:
            batch, bad = self._conform(elements, features)
            rows = [{"cells": _cells(_flat(elements[i]))} for i in sorted(bad)]
            records = self._encoder.encode(batch)
        for (index, reason), content in zip(sorted(bad.items()), rows):
            bad_row = BadRow(_SOURCE, 0, 0, reason, index, content)
            yield beam.pvalue.TaggedOutput(self.BAD, bad_row.to_json())
        missing = {f.name: arrow_conform.missing_count(batch.column(f.name)) for f in features}
        yield beam.pvalue.TaggedOutput(self.MISSING, missing)
        yield from records


def _flat(element: Any) -> dict:
    return element if isinstance(element, dict) else {"batch_rows": element.num_rows}


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


class _WriteGroupFn(beam.DoFn):
    """Writes the records grouped under one shard index to a temporary file."""

    def __init__(self, temp_dir: str, prefix: str, compression: str) -> None:
        self._temp_dir, self._prefix, self._compression = temp_dir, prefix, compression

    def process(self, group: tuple[int, Any], num_shards: int) -> Iterator[WrittenShard]:
        index, records = group
        yield write_shard(
            self._temp_dir, self._prefix, self._compression, index, num_shards, records
        )


def write_shard(
    temp_dir: str, prefix: str, compression: str, index: int, num_shards: int, records: Any
) -> WrittenShard:
    """Writes records to a temporary shard file; returns what it holds."""
    name = shard_name(prefix, index, num_shards, compression)
    temp_path = FileSystems.join(temp_dir, f"{name}.{uuid.uuid4().hex}")
    raw = FileSystems.create(temp_path, compression_type=CompressionTypes.UNCOMPRESSED)
    with ShardFileWriter(raw, compression) as writer:
        chunk: list[bytes] = []
        for record in records:
            chunk.append(record)
            if len(chunk) == 4096:
                writer.write_records(chunk)
                chunk = []
        writer.write_records(chunk)
    return WrittenShard(
        index, temp_path, name, writer.records, writer.bytes, writer.crc32c, 0, {}, 0, None,
        None, num_shards,
    )  # fmt: skip


def _framed_size(record: bytes) -> tuple[int, int]:
    return len(record) + 16, 1


def _shard_count(totals: tuple[int, int], target: int, forced: int | None) -> int:
    return choose_num_shards(totals[0], target, totals[1], forced)


def _complete(
    written: list[WrittenShard],
    num_shards: int,
    bad_rows: list[dict],
    missing: list[dict[str, int]],
    temp_dir: str,
    prefix: str,
    compression: str,
) -> list[WrittenShard]:
    """Adds empty shards for indexes no record chose, and the dead letter to shard 0."""
    have = {w.index for w in written}
    written = written + [
        write_shard(temp_dir, prefix, compression, i, num_shards, [])
        for i in range(num_shards)
        if i not in have
    ]
    written = sorted(written, key=lambda w: w.index)
    first = dataclasses.replace(
        written[0], null_counts=_sum_counts(missing), bad_records=len(bad_rows)
    )
    if bad_rows:
        path = FileSystems.join(temp_dir, f"{first.name}.{uuid.uuid4().hex}.dead_letter.jsonl")
        lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in bad_rows)
        with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            f.write(lines.encode("utf-8"))
        first = dataclasses.replace(first, dead_letter_temp_path=path)
    return [first, *written[1:]]


def _sum_counts(counts: Any) -> dict[str, int]:
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
      shard_prefix: shard file name prefix.
      num_shards: write exactly this many shards instead of sizing them.
      max_bad_fraction: the largest share of rows that may fail to convert.
    Output: a PCollection holding the published `Manifest`.
    """

    def __init__(
        self,
        output_dir: str,
        *,
        target_shard_bytes: int | str = "256MiB",
        compression: str = "none",
        features: Sequence[FeatureSpec] | None = None,
        shard_prefix: str = "data",
        num_shards: int | None = None,
        max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION,
        sample_size: int = SAMPLE_SIZE,
    ) -> None:
        super().__init__()
        if compression not in ("none", "gzip"):
            raise ValueError(f"compression must be none or gzip, got {compression!r}")
        self._output = output_dir.rstrip("/")
        self._target = parse_size(str(target_shard_bytes))
        self._compression = compression
        self._features = list(features) if features else None
        self._prefix = shard_prefix
        self._num_shards = num_shards
        self._max_bad_fraction = max_bad_fraction
        self._sample_size = sample_size
        self._temp_dir = FileSystems.join(self._output, TEMP_DIR_PREFIX + uuid.uuid4().hex[:12])

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        spec = self._spec(pcoll)
        encoded = (
            pcoll
            | "Batch" >> beam.BatchElements(min_batch_size=64, max_batch_size=4096)
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
        written = (
            records
            | "PickShard" >> beam.ParDo(_PickShardFn(), num_shards=num_shards)
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards"
            >> beam.ParDo(
                _WriteGroupFn(self._temp_dir, self._prefix, self._compression),
                num_shards=num_shards,
            )
        )
        missing = encoded[_EncodeFn.MISSING] | "MissingValues" >> beam.combiners.ToList()
        return (
            written
            | "GatherShards" >> beam.combiners.ToList()
            | "AddEmptyShardsAndDeadLetter"
            >> beam.Map(
                _complete,
                num_shards=num_shards,
                bad_rows=beam.pvalue.AsList(encoded[_EncodeFn.BAD]),
                missing=beam.pvalue.AsSingleton(missing),
                temp_dir=self._temp_dir,
                prefix=self._prefix,
                compression=self._compression,
            )
            | "Publish"
            >> beam.Map(
                publish,
                output=self._output,
                temp_dir=self._temp_dir,
                prefixes=[self._prefix],
                max_bad_fraction=self._max_bad_fraction,
                features=spec if spec is not None else self._features,
                compression=self._compression,
                inputs={"source": "WriteShards"},
                options=self._options(),
                tool_version=__version__,
            )
        )

    def _spec(self, pcoll: beam.PCollection) -> Any:
        if self._features:
            return None
        return beam.pvalue.AsSingleton(
            pcoll
            | "SampleForSpec" >> beam.combiners.Sample.FixedSizeGlobally(self._sample_size)
            | "InferSpec" >> beam.Map(infer_spec)
        )

    def _options(self) -> dict[str, Any]:
        return {
            "target_shard_bytes": self._target,
            "compression": self._compression,
            "shard_prefix": self._prefix,
            "num_shards": self._num_shards,
            "max_bad_fraction": self._max_bad_fraction,
        }
