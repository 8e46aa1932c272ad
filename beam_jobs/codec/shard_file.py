"""A shard file as the writers and the planner produce it: serialized Examples framed as
TFRecords, optionally GZIP (`deflate`), with its records, stored bytes and CRC32C measured.

A GZIP shard is one gzip member over the framed stream, which
`TFRecordDataset(..., compression_type="GZIP")` reads; a part of a shard (`joinable`) ends its
blocks with a sync flush, so that the parts join into one member (`gzip_member`).
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

import google_crc32c

from beam_jobs.codec.deflate import compressor, crc32
from beam_jobs.codec.framing import frame_records
from beam_jobs.codec.gzip_member import OpenMember, check_closing
from beam_jobs.core.compression import DEFAULT_GZIP_LEVEL, Compression

__all__ = ["ShardFileWriter", "SizeOnly"]

_GZIP_CHUNK = 1 << 20  # bytes of the framed stream given to the compressor at a time
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
    ) -> None:
        """`level`: the GZIP level (`deflate`), for `compression` "gzip". `joinable`: the file
        is a part of a shard, joined with others (`gzip_member`): `member` says how."""
        self._raw = raw
        self._gzip = compressor(level) if compression == Compression.GZIP else None
        self.records = 0
        self.bytes = 0
        self._crc = 0
        self._closed = False
        self._pending = bytearray()  # framed bytes not yet compressed: less than a chunk
        self._joinable = joinable and self._gzip is not None
        self._data_crc32 = 0  # of the framed bytes, as the gzip trailer holds it
        self._length = 0
        self.member: OpenMember | None = None  # after close(), for a joinable GZIP part

    @property
    def crc32c(self) -> str:
        """CRC32C of the stored file, as 8 lowercase hex digits."""
        return f"{self._crc:08x}"

    def write_records(self, records: list[bytes]) -> None:
        self.records += len(records)
        data = frame_records(records)
        if not self._gzip:
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

    def _store(self, data: bytes) -> None:
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

    def write(self, data: bytes) -> int:
        return len(data)

    def close(self) -> None:
        pass
