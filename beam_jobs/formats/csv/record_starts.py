"""Where CSV records start, exactly as pyarrow's CSV parser sees them, without reading from the
file's start: a record starts at offset 0 and after every newline outside a quoted field, by
the quote state of `formats.lines.quotes`.
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

from beam_jobs.formats.lines.quotes import FILE_START, NEWLINE, QuoteScanner

__all__ = ["nonempty_record_starts", "record_start_at_or_after"]

_SCAN_BLOCK = 1 << 20
_FIRST_STEP = 4 << 10


def _byte_before(f: BinaryIO, offset: int) -> int:
    if offset <= 0:
        return FILE_START
    f.seek(offset - 1)
    return f.read(1)[0]


def record_start_at_or_after(
    f: BinaryIO, offset: int, in_quotes: bool, file_size: int, delimiter: str = ","
) -> int:
    """The first record start at or after `offset` in a seekable CSV file (`file_size` when no
    record starts there).

    Args:
      f: the file, opened for binary reading.
      offset: any byte offset in [0, file_size].
      in_quotes: the lexer's state at `offset`: after every quote run that starts before it.
      file_size: size of the file in bytes.
      delimiter: the field delimiter.
    """
    if offset <= 0:
        return 0
    if offset >= file_size:
        return file_size
    previous = _byte_before(f, offset)
    if previous == NEWLINE and not in_quotes:
        return offset
    scanner = QuoteScanner(in_quotes, previous, delimiter)
    position, step = offset, _FIRST_STEP
    f.seek(offset)
    while position < file_size:
        # A record usually starts within a few hundred bytes: small steps first, so that a
        # cut costs what it reads, not a block (20,000 shards of one file cut it 40,000 times).
        block = f.read(min(step, file_size - position))
        if not block:
            break
        found = scanner.feed(block, position)
        if found.size:
            return int(found[0])
        position += len(block)
        step = min(2 * step, _SCAN_BLOCK)
    return file_size


def nonempty_record_starts(
    f: BinaryIO, start: int, end: int, delimiter: str = ",", blank_lines: bool = False
) -> np.ndarray:
    """Offsets of the non-empty records that start in [start, end) of a file, in order.

    `start` must be a record start. Blank lines (`\\n` or `\\r\\n` alone) are left out, as
    pyarrow skips them, unless `blank_lines` (a file of one column, where they are records).
    Reads the range once; used only to place bad rows, which pyarrow reports by record
    number, at their exact byte offset.
    """
    scanner = QuoteScanner(False, FILE_START if start == 0 else NEWLINE, delimiter)
    f.seek(start)
    ends, position = [], start
    while position < end:
        block = f.read(min(_SCAN_BLOCK, end - position))
        if not block:
            break
        ends.append(scanner.feed(block, position))
        position += len(block)
    starts = np.concatenate([[start], *ends]).astype(np.int64)
    starts = starts[starts < min(position, end)]
    if blank_lines:
        return starts
    following = np.append(starts[1:], position)
    lengths = following - starts
    empty = lengths == 1  # "\n" alone (a record before another ends with its newline)
    for i in np.flatnonzero(lengths == 2).tolist():
        f.seek(int(starts[i]))
        empty[i] = f.read(1) == b"\r"
    if len(starts) and lengths[-1] <= 2:  # the file's last line may have no newline: `"`
        f.seek(int(starts[-1]))
        empty[-1] = f.read(int(lengths[-1])) in (b"\n", b"\r\n")
    return starts[~empty]
