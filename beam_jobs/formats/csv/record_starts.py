"""Where CSV records start, so byte ranges of one file can be converted independently.

A range [start, end) of a file owns the records that *start* inside it. A record starts at
offset 0 and right after every newline that is outside double quotes (RFC 4180: a quoted field
may hold newlines, and a quote inside it is doubled). Whether a newline is quoted depends only on
the parity of the number of quote bytes before it, so a worker that knows how many quotes come
before its range (counted in parallel by an earlier stage) finds its first record exactly, with
no need to read the file from the start.
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

__all__ = [
    "count_quotes",
    "first_record_start",
    "nonempty_record_starts",
    "record_start_at_or_after",
    "record_starts",
]

_QUOTE = ord('"')
_NEWLINE = ord("\n")
_SCAN_BLOCK = 1 << 20


def count_quotes(data: bytes) -> int:
    """Number of double-quote bytes in `data`."""
    return data.count(b'"')


def record_starts(block: bytes, quotes_before: int) -> np.ndarray:
    """Indices just past every unquoted newline in `block`: where the next record starts.

    Args:
      block: bytes of a CSV file.
      quotes_before: number of quote bytes in the file before `block[0]`.
    """
    arr = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(arr == _NEWLINE)
    if newlines.size == 0 or (quotes_before % 2 == 0 and _QUOTE not in block):
        return newlines + 1
    # Quotes up to and including each position; a newline is no quote, so this is also the
    # count strictly before it.
    quotes_upto = np.cumsum(arr == _QUOTE, dtype=np.int64)[newlines] + quotes_before
    return newlines[quotes_upto % 2 == 0] + 1


def first_record_start(block: bytes, quotes_before: int) -> int | None:
    """Index just past the first unquoted newline in `block`, or None if it has none."""
    starts = record_starts(block, quotes_before)
    return int(starts[0]) if starts.size else None


def record_start_at_or_after(
    f: BinaryIO, offset: int, quotes_before: int, file_size: int
) -> tuple[int, int]:
    """The first record start at or after `offset` in a seekable CSV file.

    Args:
      f: the file, opened for binary reading.
      offset: any byte offset in [0, file_size].
      quotes_before: number of quote bytes in the file before `offset`.
      file_size: size of the file in bytes.

    Returns:
      (record start, number of quote bytes before it). The start is `file_size` when no record
      starts at or after `offset`.
    """
    if offset <= 0:
        return 0, 0
    if offset >= file_size:
        return file_size, quotes_before
    # A record starts at `offset` itself when the byte before it is an unquoted newline, so
    # scanning begins one byte earlier.
    pos = offset - 1
    f.seek(pos)
    first = f.read(1)
    quotes = quotes_before - (1 if first == b'"' else 0)
    f.seek(pos)
    while pos < file_size:
        block = f.read(min(_SCAN_BLOCK, file_size - pos))
        if not block:
            break
        found = first_record_start(block, quotes)
        if found is not None:
            return pos + found, quotes + count_quotes(block[:found])
        quotes += count_quotes(block)
        pos += len(block)
    return file_size, quotes


def nonempty_record_starts(f: BinaryIO, start: int, end: int, quotes_before: int) -> np.ndarray:
    """Offsets of the non-empty records that start in [start, end) of a file, in order.

    `start` must be a record start with `quotes_before` quote bytes before it. Blank lines
    (`\n` or `\r\n` alone) are left out, as pyarrow skips them. Reads the range once; used only
    to place bad rows, which pyarrow reports by record number, at their exact byte offset.
    """
    f.seek(start)
    ends, position, quotes = [], start, quotes_before
    while position < end:
        block = f.read(min(_SCAN_BLOCK, end - position))
        if not block:
            break
        ends.append(record_starts(block, quotes) + position)
        quotes += count_quotes(block)
        position += len(block)
    starts = np.concatenate([[start], *ends]).astype(np.int64)
    starts = starts[starts < position] if position < end else starts[starts < end]
    following = np.append(starts[1:], position)
    lengths = following - starts
    empty = lengths == 1  # "\n" alone
    maybe_crlf = np.flatnonzero(lengths == 2)
    for i in maybe_crlf.tolist():
        f.seek(int(starts[i]))
        empty[i] = f.read(1) == b"\r"
    return starts[~empty]
