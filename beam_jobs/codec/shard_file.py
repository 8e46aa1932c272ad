"""A shard file as the writers and the planner produce it: serialized Examples framed as
TFRecords, optionally GZIP (`deflate`), with its records, stored bytes and CRC32C measured.

A GZIP shard is one gzip member over the framed stream, which
`TFRecordDataset(..., compression_type="GZIP")` reads; a part of a shard (`joinable`) ends its
blocks with a sync flush, so that the parts join into one member (`gzip_member`).
"""

from __future__ import annotations

import zlib
from typing import BinaryIO, TypeAlias

import google_crc32c
import numpy as np
import pyarrow as pa

from beam_jobs.codec.deflate import compressor, crc32
from beam_jobs.codec.framing import frame_records
from beam_jobs.codec.gzip_member import OpenMember, check_closing
from beam_jobs.core.compression import DEFAULT_GZIP_LEVEL, Compression

__all__ = ["Framed", "ShardFileWriter", "SizeOnly", "seek_stride"]

# Framed records as they come: bytes, or an Arrow buffer (the shuffle's, not copied again).
Framed: TypeAlias = "bytes | memoryview | pa.Buffer"

_GZIP_CHUNK = 1 << 20  # bytes of the framed stream given to the compressor at a time
# Seek points (`seek_every`): the first record at or past every so many bytes of the framed
# stream, where a reader may start mid-shard (the manifest lists them): about 64 a shard,
# between 64 KiB and 4 MiB apart (`seek_stride`).
SEEK_POINTS = 64
MIN_SEEK_BYTES = 64 << 10
MAX_SEEK_BYTES = 4 << 20


def seek_stride(framed_bytes: int) -> int:
    """The bytes between seek points of a file of `framed_bytes` framed records."""
    return min(MAX_SEEK_BYTES, max(MIN_SEEK_BYTES, framed_bytes // SEEK_POINTS))


_SYNC = zlib.Z_SYNC_FLUSH  # the same constant in ISA-L's zlib interface


class ShardFileWriter:
    """Writes framed records to a binary file, optionally GZIP, and measures the stored bytes.

    After `close()`, `records`, `bytes` and `crc32c` describe the file exactly as stored, which
    is what the manifest records and `verify` checks.
    """

    def __init__(
        self,
        raw: BinaryIO | SizeOnly,
        compression: Compression,
        level: int = DEFAULT_GZIP_LEVEL,
        joinable: bool = False,
        seek_every: int = 0,
    ) -> None:
        """`level`: the GZIP level (`deflate`), for `compression` "gzip". `joinable`: the file
        is a part of a shard, joined with others (`gzip_member`): `member` says how.
        `seek_every`: note where records start past every so many bytes of the framed stream
        (`write_framed` only; 0: none)."""
        self._raw = raw
        self._gzip = compressor(level) if compression == Compression.GZIP else None
        self.records = 0
        self.bytes = 0
        self._crc = 0
        self._closed = False
        self._pending = bytearray()  # framed bytes not yet compressed: less than a chunk
        self._joinable = joinable and self._gzip is not None
        self._data_crc32 = 0  # of the framed bytes, as the gzip trailer holds it
        self._length = 0  # framed bytes taken (before compression)
        self.member: OpenMember | None = None  # after close(), for a joinable GZIP part
        self._seek_every = seek_every
        self.seek: list[tuple[int, int]] = []  # (record, framed offset), record 0 implied
        self._next_seek = seek_every

    @property
    def framed_bytes(self) -> int:
        """Bytes of the framed stream written (what a GZIP file holds once decompressed)."""
        return self._length

    @property
    def crc32c(self) -> str:
        """CRC32C of the stored file, as 8 lowercase hex digits."""
        return f"{self._crc:08x}"

    def write_records(self, records: list[bytes]) -> None:
        self.records += len(records)
        self._take(frame_records(records))

    def write_framed(self, data: Framed, lengths: np.ndarray) -> None:
        """Writes records already framed, back to back (`lengths`: each one's framed size)."""
        if self._seek_every and len(lengths):
            self._note_seek_points(lengths)
        self.records += len(lengths)
        self._take(data)

    def _note_seek_points(self, lengths: np.ndarray) -> None:
        """The first record at or past each multiple of the stride not yet passed."""
        every = self._seek_every
        starts = self._length + np.cumsum(lengths) - lengths
        bounds = np.arange(self._next_seek, int(starts[-1]) + 1, every, dtype=np.int64)
        for i in np.unique(np.searchsorted(starts, bounds)).tolist():
            point = (self.records + i, int(starts[i]))
            if point[0] and (not self.seek or point[0] > self.seek[-1][0]):
                self.seek.append(point)
        self._next_seek = (int(starts[-1]) // every + 1) * every

    def _take(self, data: Framed) -> None:
        """The framed stream's next bytes: stored, or compressed in whole chunks."""
        if not self._gzip:
            self._length += len(data)
            self._store(data)
            return
        # The compressor is fed whole chunks of the framed stream, whatever the batches: its
        # output depends on where its input is cut, and so would a shard's bytes on how many
        # rows a batch holds.
        if self._joinable:
            self._data_crc32 = crc32(data, self._data_crc32)
        self._length += len(data)
        self._pending += data
        whole = len(self._pending) - len(self._pending) % _GZIP_CHUNK
        if whole:
            with memoryview(self._pending) as view:
                for start in range(0, whole, _GZIP_CHUNK):
                    self._store(self._gzip.compress(view[start : start + _GZIP_CHUNK]))
            del self._pending[:whole]

    def _store(self, data: Framed) -> None:
        if data:
            self._raw.write(data)
            self.bytes += len(data)
            self._crc = google_crc32c.extend(self._crc, data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._gzip and self._joinable:
            self._store(self._gzip.compress(bytes(self._pending)) + self._gzip.flush(_SYNC))
            self.member = OpenMember(self.bytes, self._crc, self._data_crc32, self._length)
            tail = self._gzip.flush()
            check_closing(tail, self._data_crc32, self._length)
            self._store(tail)
        elif self._gzip:
            self._store(self._gzip.compress(bytes(self._pending)) + self._gzip.flush())
        self._pending.clear()
        self._raw.close()

    def __enter__(self) -> ShardFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SizeOnly:
    """A file that keeps nothing: for measuring what a shard would store (the planner)."""

    def write(self, data: Framed) -> int:
        return len(data)

    def close(self) -> None:
        pass
