"""Line-delimited inputs (text, JSON lines): the lines that start inside a byte range.

A piece owns every line that starts inside it, so neighbouring pieces never share or miss a
line: a piece that starts mid-line skips to the next line start, and its last line may run past
its end. Lines are handed out in chunks of whole lines, split into Arrow arrays with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa

__all__ = ["LineTooLong", "line_chunks", "line_offsets", "split_lines"]

CHUNK_BYTES = 4 << 20
_SCAN_BYTES = 64 << 10


def _next_line_start(f: BinaryIO, offset: int) -> int | None:
    """The first line start at or after `offset` > 0 (None when no line starts there)."""
    f.seek(offset - 1)
    position = offset - 1
    while True:
        block = f.read(_SCAN_BYTES)
        if not block:
            return None
        newline = block.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(block)


class LineTooLong(Exception):
    """A line runs on past the longest a reader holds in memory (a decompression bomb, or a
    file that is not line-delimited)."""

    def __init__(self, offset: int, limit: int) -> None:
        super().__init__(f"the line starting at byte {offset:,} is longer than {limit:,} bytes")
        self.offset, self.limit = offset, limit


def line_chunks(
    f: BinaryIO,
    start: int,
    end: int,
    chunk_bytes: int = CHUNK_BYTES,
    max_line_bytes: int | None = None,
) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) chunks holding exactly the lines that start in [start, end).

    Each chunk is whole lines, ending with a newline except the file's last line.

    Raises:
      LineTooLong: for a line longer than `max_line_bytes`, before more of it is read.
    """
    position = 0 if start == 0 else _next_line_start(f, start)
    if position is None or position >= end:
        return
    f.seek(position)
    carry = b""
    while position < end:
        data = f.read(chunk_bytes)
        if not data:
            if carry:
                yield position, carry
            return
        buffer = carry + data
        last_newline = buffer.rfind(b"\n")
        if last_newline < 0:
            carry = buffer
            if max_line_bytes is not None and len(carry) > max_line_bytes:
                raise LineTooLong(position, max_line_bytes)
            continue
        complete, carry = buffer[: last_newline + 1], buffer[last_newline + 1 :]
        if position + len(complete) > end:
            # The newline at or after end - 1 closes the last line that starts before `end`.
            stop = complete.index(b"\n", max(0, end - 1 - position))
            yield position, complete[: stop + 1]
            return
        yield position, complete
        position += len(complete)


def line_offsets(chunk: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (newline excluded) of every line in a chunk of whole lines."""
    data = np.frombuffer(chunk, dtype=np.uint8)
    newlines = np.flatnonzero(data == 10)
    ends = newlines if chunk.endswith(b"\n") else np.append(newlines, len(chunk))
    starts = np.concatenate(([0], newlines + 1))[: len(ends)]
    return starts, ends


def split_lines(chunk: bytes) -> pa.BinaryArray:
    """The lines of a chunk as one binary array, without their '\\n' or '\\r\\n' endings."""
    starts, ends = line_offsets(chunk)
    data = np.frombuffer(chunk, dtype=np.uint8)
    crlf = ends[(ends > starts) & (data[np.maximum(ends - 1, 0)] == 13)] - 1
    dropped = np.union1d(np.flatnonzero(data == 10), crlf)
    keep = np.ones(len(data), dtype=bool)
    keep[dropped] = False
    # A line's offset in the kept bytes: its start minus the bytes dropped before it.
    offsets = np.append(starts, len(data)) - np.searchsorted(dropped, np.append(starts, len(data)))
    return pa.Array.from_buffers(
        pa.binary(),
        len(starts),
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data[keep].tobytes())],
    )
