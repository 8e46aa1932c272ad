"""Writing grouped records as shards, for `WriteShards`: each record goes to the lightest
shard of its bundle, records are grouped by shard index, and each group becomes one temporary
shard file (shard 0 also carries the dead letter, the missing-value counts, the statistics and
the count of elements received, which publishing checks against the records written and set
aside)."""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import google_crc32c
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.framing import RECORD_OVERHEAD_BYTES
from beam_jobs.codec.shard_file import ShardFileWriter
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.tasks import WrittenShard, sum_counts
from beam_jobs.plan.shards import choose_num_shards
from beam_jobs.sink.counters import counter
from beam_jobs.sink.dead_letter import write_dead_letter
from beam_jobs.sink.run_files import create_run_file, make_run_folder
from beam_jobs.stats.packed import PackedStats, merge_all
from tfdata_reader.manifest import Counts, RecordOrder, shard_name

__all__ = [
    "PickShardFn",
    "WriteGroupFn",
    "every_index",
    "framed_size",
    "shard_count",
    "shuffled",
]

_WRITE_CHUNK = 4096


def framed_size(record: bytes) -> tuple[int, int]:
    return len(record) + RECORD_OVERHEAD_BYTES, 1


def shard_count(totals: tuple[int, int], target: int, forced: int | None) -> int:
    return choose_num_shards(totals[0], target, totals[1], forced)


class PickShardFn(beam.DoFn):
    """Sends each record to the shard that has the fewest bytes so far in this bundle.

    A hash of each record balances shards only statistically: with about 550 records per shard,
    one test run here put the largest shard 13% over its 48 KiB target. Filling the lightest
    shard keeps a bundle's shards within one record of each other whatever the data's order or
    periodicity. Ties go round the shards from an offset the bundle's first record picks, so
    that many small bundles do not all begin with shard 0.
    """

    def start_bundle(self) -> None:
        self._loads: list[tuple[int, int, int]] | None = None  # heap of (bytes, rank, shard)

    def process(self, record: bytes, num_shards: int) -> Iterator[tuple[int, bytes]]:
        if self._loads is None:
            offset = google_crc32c.value(record) % num_shards
            self._loads = [(0, (s - offset) % num_shards, s) for s in range(num_shards)]
            heapq.heapify(self._loads)
        load, rank, shard = self._loads[0]
        heapq.heapreplace(self._loads, (load + framed_size(record)[0], rank, shard))
        yield shard, record


def shuffled(records: Iterable[bytes | None], seed: int, shard: int) -> list[bytes | None]:
    """A shard's records in an order drawn from their own bytes and the seed: random whatever
    order the runner hands them in (each bundle sent its records round the shards), and the
    same for the same records. A group is held in memory to be ordered: a shard at most."""
    held = [r for r in records if r is not None]
    salt = f"{seed}:{shard}:".encode()
    keys = np.fromiter(
        ((google_crc32c.value(r) << 32) | google_crc32c.extend(google_crc32c.value(salt), r)
         for r in held),
        dtype=np.uint64,
        count=len(held),
    )  # fmt: skip
    order = np.lexsort((np.arange(len(held)), keys))
    return [held[i] for i in order.tolist()]


def every_index(num_shards: int) -> Iterator[tuple[int, None]]:
    """One empty marker per shard index, so that a shard no record chose is written too."""
    return ((index, None) for index in range(num_shards))


class WriteGroupFn(beam.DoFn):
    """Writes the records grouped under one shard index to a temporary file.

    Shard 0 also carries what is not any one shard's: the dead letter of every bad element,
    the missing-value counts and the statistics of all records.
    """

    def __init__(self, temp_dir: str, sharding: ShardingOptions) -> None:
        self._temp_dir, self._sharding = temp_dir, sharding
        self._records = counter("records_written")
        self._bytes = counter("bytes_written")
        self._shards = counter("shards_written")

    def setup(self) -> None:
        make_run_folder(self._temp_dir)  # no launcher made it

    def process(
        self,
        group: tuple[int, Any],
        num_shards: int,
        bad_rows: list[dict[str, Any]],
        tallies: list[dict[str, Any]],
    ) -> Iterator[WrittenShard]:
        index, records = group
        sharding = self._sharding
        name = shard_name(sharding.shard_prefix, index, num_shards, sharding.compression)
        temp_path = FileSystems.join(self._temp_dir, f"{name}.{uuid.uuid4().hex}")
        raw = create_run_file(temp_path)
        with ShardFileWriter(raw, sharding.compression, sharding.gzip_level) as writer:
            if sharding.order is RecordOrder.SHUFFLED:
                records = shuffled(records, sharding.shuffle_seed, index)
            chunk: list[bytes] = []
            for record in records:
                if record is None:
                    continue  # the marker of `every_index`
                chunk.append(record)
                if len(chunk) == _WRITE_CHUNK:
                    writer.write_records(chunk)
                    chunk = []
            writer.write_records(chunk)
        first = index == 0
        dead_letter = None
        if first and bad_rows:
            dead_letter = write_dead_letter(self._temp_dir, name, bad_rows).path
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
            counts=_counts(tallies, len(bad_rows)) if first else Counts(),
            stats=PackedStats(merge_all(t["stats"] for t in tallies)) if first else {},
            dead_letter_temp_path=dead_letter,
            num_shards=num_shards,
        )


def _counts(tallies: list[dict[str, Any]], bad_records: int) -> Counts:
    """What every bundle of elements counted (`sink.elements`), under the manifest's names."""
    return Counts(
        records_read=sum(t["elements"] for t in tallies),
        bad_records=bad_records,
        missing_values=sum_counts(t["missing"] for t in tallies),
        ignored_fields=sum_counts(t["ignored"] for t in tallies),
        float32_rounded_integers=sum_counts(t["rounded"] for t in tallies),
        float32_stored_as_zero=sum_counts(t["zeroed"] for t in tallies),
    )
