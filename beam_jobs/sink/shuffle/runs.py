"""Shuffled conversions, first pass: a write task's framed records dealt out to random buckets,
stored in runs grouped by bucket; and a bucket read back from every run.

A bucket is a part of one output shard (`plan.shuffle`). Each run's records are dealt out to
the buckets in an order drawn from a Philox stream keyed by the seed, the write task and its
output (a split): every bucket gets a random subset of the run, as many records as any other
give or take one, and the same inputs and options send every record to the same bucket on
every run and runner. A task holds up to the plan's run bytes of framed records, then stores
them as one *run* of its file:

    uint32 record lengths (framed), bucket by bucket | framed records, bucket by bucket

with where each bucket's lengths and records are (`Run`). The second pass
(`sink.shuffle.shards`) reads one bucket's stretch of every run, in task and run order, and permutes
the bucket's records before writing them into its shard.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import google_crc32c
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.framing import frame_batch
from beam_jobs.core.errors import DataError
from beam_jobs.core.tasks import Run
from beam_jobs.plan.shuffle import RUN_BYTES
from beam_jobs.sink.run_files import create_run_file
from beam_jobs.sink.shuffle.draws import bucket_stream, uniform_below

__all__ = ["RunSink", "RunWriter", "gather", "read_bucket"]


GATHER_RECORDS = 1 << 15  # records put in order at a time: what is held besides the input


def gather(
    data: bytes | bytearray, lengths: np.ndarray, order: np.ndarray
) -> Iterator[tuple[pa.Buffer, np.ndarray]]:
    """The records of `data` (`lengths`: their sizes, back to back) in `order`: buffers of up
    to GATHER_RECORDS records and their lengths (Arrow's take over one array, a slice of the
    output at a time)."""
    if not len(lengths):
        return
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    records = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    for start in range(0, len(order), GATHER_RECORDS):
        which = order[start : start + GATHER_RECORDS]
        taken = records.take(pa.array(which, pa.int64()))
        bounds = np.frombuffer(taken.buffers()[1], np.int64, len(which) + 1, taken.offset * 8)
        yield taken.buffers()[2][int(bounds[0]) : int(bounds[-1])], lengths[which]


class RunWriter:
    """A write task's records for the shuffle: each to a random bucket of `buckets`, held up to
    `budget` bytes, then stored as a run of the task's file at `path`."""

    def __init__(
        self,
        path: str,
        buckets: int,
        draws: tuple[int, int, int],
        budget: int | None = None,
    ) -> None:
        """`draws`: (seed, write task, output of the task): what keys its bucket draws."""
        self.path = path
        self._buckets = buckets
        self._bits = bucket_stream(*draws)
        self._budget = budget or RUN_BYTES
        self.crc32c = 0  # of the file as stored
        self._held = bytearray()  # framed records, as they came
        self._lengths: list[np.ndarray] = []  # their framed sizes
        self._file: BinaryIO | None = None
        self._offset = 0
        self.runs: list[Run] = []
        self.records = 0
        self.bytes = 0  # framed bytes taken

    def write(self, records: list[builtins.bytes]) -> None:
        """Takes serialized records."""
        if not records:
            return
        # Framed as they come (what a shard file's writer does too), put in bucket order
        # when stored: one Arrow take, no per-record Python.
        framed, lengths = frame_batch(records)
        self._held += framed  # one buffer: no join (and no second copy) when stored
        self._lengths.append(lengths)
        self.records += len(records)
        self.bytes += len(framed)
        if len(self._held) >= self._budget:
            self._store()

    def _store(self) -> None:
        if not self._lengths:
            return
        data, lengths = self._held, np.concatenate(self._lengths)
        self._held, self._lengths = bytearray(), []
        buckets = self._draw_buckets(len(lengths))
        # Small keys sort by radix (numpy's stable sort of 16-bit integers): the same order.
        keys = buckets.astype(np.uint16) if self._buckets <= 1 << 16 else buckets
        order = np.argsort(keys, kind="stable")
        counts = np.bincount(buckets, minlength=self._buckets)
        sizes = np.bincount(buckets, lengths, minlength=self._buckets).astype(np.int64)
        if self._file is None:
            self._file = create_run_file(self.path)
        self._write(self._file, lengths[order].astype("<u4").tobytes())
        for buffer, _ in gather(data, lengths, order):
            self._write(self._file, buffer)
        held_buckets = np.flatnonzero(counts)
        self.runs.append(
            Run(self.path, self._offset, held_buckets, counts[held_buckets], sizes[held_buckets])
        )
        self._offset += 4 * len(lengths) + len(data)

    def _write(self, f: BinaryIO, data: bytes | pa.Buffer) -> None:
        f.write(data)
        self.crc32c = google_crc32c.extend(self.crc32c, data)

    def _draw_buckets(self, count: int) -> np.ndarray:
        """Each record's bucket: the records dealt out in a random order, from a random
        bucket on, one a bucket in turn. So every bucket gets a random subset of the run, and
        as many records as any other, give or take one (shards come out balanced however few
        records they hold, where independent draws would vary by their square root)."""
        if count == 0:
            return np.zeros(0, np.int64)
        draws = self._bits.random_raw(count + 1).astype(np.uint64)
        first = int(uniform_below(draws[-1:], self._buckets)[0])
        dealt = np.empty(count, np.int64)
        dealt[np.argsort(draws[:count], kind="stable")] = np.arange(count, dtype=np.int64)
        return (dealt + first) % self._buckets

    @property
    def file_bytes(self) -> int:
        """Bytes its file holds: the runs stored so far."""
        return self._offset

    def close(self) -> tuple[Run, ...]:
        """Stores what it holds; returns its runs (none when it took no record)."""
        self._store()
        if self._file is not None:
            self._file.close()
            self._file = None
        return tuple(self.runs)


def read_bucket(paths: Sequence[str], stretches: np.ndarray) -> tuple[bytearray, np.ndarray]:
    """One bucket's framed records from its stretches of every run (rows of `STRETCH_COLUMNS`,
    files indexing `paths`), in the order given, read into one buffer (no copy to join them),
    and their lengths.

    Raises:
      DataError: when a run's file is shorter than its index says (a lost temporary file).
    """
    data = bytearray(int(stretches[:, 5].sum()))
    lengths: list[np.ndarray] = []
    opened: dict[int, BinaryIO] = {}
    at = 0
    try:
        with memoryview(data) as view:
            for _, file, records, lengths_at, data_at, size in stretches.tolist():
                f = opened.get(file)
                if f is None:
                    f = opened[file] = FileSystems.open(
                        paths[file], compression_type=CompressionTypes.UNCOMPRESSED
                    )
                f.seek(lengths_at)
                raw = f.read(4 * records)
                f.seek(data_at)
                got = _read_into(f, view[at : at + size])
                if len(raw) != 4 * records or got != size:
                    raise DataError(
                        f"{paths[file]}: ends before the records its index lists (bytes "
                        f"{data_at:,}+{size:,}): a temporary file of the shuffle was cut or "
                        "removed; run the conversion again"
                    )
                lengths.append(np.frombuffer(raw, dtype="<u4").astype(np.int64))
                at += got
    finally:
        for f in opened.values():
            f.close()
    return data, np.concatenate(lengths) if lengths else np.zeros(0, np.int64)


def _read_into(f: BinaryIO, view: memoryview) -> int:
    """Fills `view` from `f` (a file system's reads may come back short); the bytes read."""
    done = 0
    while done < len(view):
        got = f.readinto(view[done:])  # type: ignore[attr-defined]
        if not got:
            break
        done += got
    return done


class RunSink:
    """A write task's output in a shuffled conversion: Examples framed and sent to a `RunWriter`,
    counted like a shard file's (`records`, framed `bytes`); `runs` after `close()`."""

    member = None

    def __init__(self, runs: RunWriter) -> None:
        self._runs = runs
        self.path = self._runs.path
        self.runs: tuple[Run, ...] = ()

    @property
    def records(self) -> int:
        return self._runs.records

    @property
    def bytes(self) -> int:
        return self._runs.bytes

    @property
    def crc32c(self) -> str:
        """CRC32C of the runs' file as stored (after `close()`)."""
        return f"{self._runs.crc32c:08x}"

    @property
    def file_bytes(self) -> int:
        """The runs' file's size (after `close()`)."""
        return self._runs.file_bytes

    def write_records(self, records: list[builtins.bytes]) -> None:
        self._runs.write(records)

    def close(self) -> None:
        self.runs = self._runs.close()
