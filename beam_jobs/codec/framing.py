"""TFRecord framing: records framed in bulk, read back and checked, and record starts found.

Wire format of one record (little endian), as TensorFlow's `TFRecordWriter` writes it:
    uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
Framing here needs no TensorFlow import, so conversion workers start in a fraction of the time.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import google_crc32c
import numpy as np

from beam_jobs.core.errors import FramingError

__all__ = [
    "RECORD_OVERHEAD_BYTES",
    "count_records",
    "find_record_start",
    "frame_batch",
    "frame_records",
    "masked_crc32c",
    "read_records",
]

_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
# Framing bytes around each record's data: length (8), its checksum (4), data checksum (4).
RECORD_OVERHEAD_BYTES = 16
_SCAN_WINDOW = 1 << 20
VERIFY_BYTES = 64 << 20  # how far the records after a resync candidate must chain


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C: rotate right by 15 bits, add a constant."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _mask(crcs: np.ndarray) -> np.ndarray:
    crcs = crcs.astype(np.uint64)
    rotated = (crcs >> np.uint64(15)) | (crcs << np.uint64(17))
    return ((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype("<u4")


def frame_records(records: Sequence[bytes]) -> bytes:
    """Frames serialized records as one TFRecord byte string."""
    return frame_batch(records)[0]


def frame_batch(records: Sequence[bytes]) -> tuple[bytes, np.ndarray]:
    """Frames serialized records as one TFRecord byte string; also each record's framed size
    (int64).

    Lengths and checksums are computed in bulk (numpy, and `map` over the C CRC32C), and the
    output is one `join` of the records with 16-byte "glue" pieces between them: the footer of
    record i followed by the header of record i+1.
    """
    n = len(records)
    if n == 0:
        return b"", np.zeros(0, np.int64)
    lengths = np.fromiter(map(len, records), dtype=np.uint64, count=n)
    data_crcs = np.fromiter(map(google_crc32c.value, records), dtype=np.uint64, count=n)
    # Few distinct lengths occur in a batch, so their checksums are computed once each.
    distinct, which = np.unique(lengths, return_inverse=True)
    length_crcs = np.array([google_crc32c.value(_U64.pack(int(v))) for v in distinct], np.uint64)
    glue = np.zeros(n + 1, dtype=[("footer", "<u4"), ("length", "<u8"), ("length_crc", "<u4")])
    glue["footer"][1:] = _mask(data_crcs)
    glue["length"][:-1] = lengths
    glue["length_crc"][:-1] = _mask(length_crcs[which])
    raw = glue.tobytes()
    parts: list[bytes] = [b""] * (2 * n + 1)
    parts[0] = raw[4:16]  # the first header has no footer before it
    parts[1::2] = records
    parts[2:-1:2] = [raw[i : i + 16] for i in range(16, 16 * n, 16)]
    parts[-1] = raw[16 * n : 16 * n + 4]  # the last footer has no header after it
    return b"".join(parts), lengths.astype(np.int64) + RECORD_OVERHEAD_BYTES


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    parts, left = [], size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_records(
    stream: BinaryIO, offset: int = 0, stop: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of each record of a framed (uncompressed) TFRecord stream, checked.

    Args:
      stream: positioned at a record start.
      offset: that position, to report where each record starts.
      stop: end before a record that starts at or after this offset, without reading it.

    Raises:
      FramingError: naming the record index, its byte offset and what is wrong with it.
    """
    index = 0
    while stop is None or offset < stop:
        where = f"record {index} (byte {offset})"
        header = _read_exact(stream, 12)
        if not header:
            return
        if len(header) < 12:
            raise FramingError(f"{where}: stream ends inside the record header")
        (length,) = _U64.unpack_from(header)
        (length_crc,) = _U32.unpack_from(header, 8)
        if masked_crc32c(header[:8]) != length_crc:
            raise FramingError(f"{where}: length field fails its checksum")
        body = _read_exact(stream, length + 4)
        if len(body) < length + 4:
            raise FramingError(f"{where}: stream ends inside the record data")
        data = body[:length]
        if masked_crc32c(data) != _U32.unpack_from(body, length)[0]:
            raise FramingError(f"{where}: data fails its checksum")
        yield offset, data
        offset += length + RECORD_OVERHEAD_BYTES
        index += 1


def count_records(stream: BinaryIO) -> int:
    """Walks a framed (uncompressed) TFRecord stream, checking every checksum; returns the count.

    Raises:
      FramingError: naming the record index and what is wrong with it.
    """
    return sum(1 for _ in read_records(stream))


def _chains_to(stream: BinaryIO, start: int, until: int, size: int) -> bool:
    """Whether the records from `start` frame correctly (each length and its checksum, each
    record inside the file) up to the first record at or past `until`, or to the file's end."""
    position = start
    while position < until:
        if position == size:
            return True
        stream.seek(position)
        header = _read_exact(stream, 12)
        if len(header) < 12 or masked_crc32c(header[:8]) != _U32.unpack_from(header, 8)[0]:
            return False
        (length,) = _U64.unpack_from(header)
        position += RECORD_OVERHEAD_BYTES + length
        if position > size:
            return False
    return True


def find_record_start(
    stream: BinaryIO, offset: int, size: int, verify_bytes: int = VERIFY_BYTES
) -> int | None:
    """The first record start at or after `offset` in a TFRecord file of `size` bytes.

    Without an index, a record start is recognized by its framing: a length whose masked
    CRC32C follows it, and data whose masked CRC32C matches too. A payload may itself hold
    framed records (a TFRecord file stored in a bytes feature), so a candidate counts only when
    the records after it chain correctly for `verify_bytes` (or to the file's end): an inner
    frame's chain breaks where its enclosing record ends. (A payload longer than that could
    still fool it; publishing then finds the pieces do not cover the file end to end, and
    fails.) Returns None when no record starts in [offset, size).
    """
    position = offset
    while position + RECORD_OVERHEAD_BYTES <= size:
        stream.seek(position)
        window = stream.read(_SCAN_WINDOW + 12)
        for i in range(max(0, min(len(window) - 11, _SCAN_WINDOW))):
            (length,) = _U64.unpack_from(window, i)
            start = position + i
            if start + RECORD_OVERHEAD_BYTES + length > size:
                continue
            if masked_crc32c(window[i : i + 8]) != _U32.unpack_from(window, i + 8)[0]:
                continue
            stream.seek(start + 12)
            body = _read_exact(stream, length + 4)
            if masked_crc32c(body[:length]) != _U32.unpack_from(body, length)[0]:
                continue
            if _chains_to(stream, start, start + verify_bytes, size):
                return start
        position += _SCAN_WINDOW
    return None
