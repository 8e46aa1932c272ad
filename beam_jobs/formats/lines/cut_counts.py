"""The CSV quote state and the newline count at each cut point of a line-based input file.

A CSV writer whose byte range starts mid-file needs to know whether its start is inside a
quoted field to find its first record (see `formats.csv.record_starts`); every writer of a
line-based format needs the number of newlines before its start to give a bad row's line
number. Both come from one read of the bytes before each cut, split into segments between
consecutive cuts that are scanned in parallel (about 0.5-1 GB/s per core) and composed in order,
file by file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import BinaryIO, NoReturn

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import DataError, raised_for_launcher
from beam_jobs.core.inputs import Stamp, reading_input
from beam_jobs.formats.lines.line_ends import opened_as_lf
from beam_jobs.formats.lines.quotes import QUOTE, QuoteEffect, QuoteScanner

__all__ = [
    "Counted",
    "Counting",
    "CutCounts",
    "Segment",
    "count_lines_to",
    "count_segment",
    "count_segment_in_worker",
    "read_chunks",
    "segments_between_cuts",
]

_READ_CHUNK = 8 << 20
_NEWLINE = ord(b"\n")


@dataclasses.dataclass(frozen=True)
class Counting:
    """What a line-based format needs counted before each cut point: the newlines (for bad
    rows' line numbers) and, with `quotes`, the CSV quote state, whose fields this `delimiter`
    separates, past `leading_lines` lines at a file's start (`--skip_header_lines`)."""

    quotes: bool = True
    delimiter: str = ","
    leading_lines: int = 0
    cr_lines: bool = False  # files read with every CR as LF (`line_ends`)


@dataclasses.dataclass(frozen=True)
class Segment:
    """Bytes [start, end) of a file to count; `end` is a cut point. `stamp`: the file as
    listed, which it must still be."""

    path: str
    start: int
    end: int
    counting: Counting = Counting()
    stamp: Stamp | None = None


@dataclasses.dataclass(frozen=True)
class Counted:
    segment: Segment
    effect: QuoteEffect  # on the in-quotes state, of the quote runs that start in the segment
    newlines: int


@dataclasses.dataclass(frozen=True)
class CutCounts:
    """Per file, the in-quotes state and the newlines before each cut point."""

    in_quotes: dict[str, dict[int, bool]] = dataclasses.field(default_factory=dict)
    newlines: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_counted(cls, counted: Iterable[Counted]) -> CutCounts:
        """Running sums of the segments' counts, file by file."""
        counts = cls()
        for c in sorted(counted, key=lambda c: (c.segment.path, c.segment.start)):
            path, start, end = c.segment.path, c.segment.start, c.segment.end
            states = counts.in_quotes.setdefault(path, {})
            newlines = counts.newlines.setdefault(path, {})
            states[end] = c.effect.apply(states.get(start, False))
            newlines[end] = newlines.get(start, 0) + c.newlines
        return counts

    def in_quotes_at(self, path: str, offset: int) -> bool:
        """Whether `offset` (0 or a cut point) is inside a quoted field."""
        return False if offset == 0 else self.in_quotes[path][offset]

    def newlines_before(self, path: str, offset: int) -> int:
        return 0 if offset == 0 else self.newlines[path][offset]


def segments_between_cuts(
    cuts: dict[str, list[int]],
    counting: Counting = Counting(),
    stamps: Mapping[str, Stamp | None] | None = None,
) -> list[Segment]:
    """The segments between consecutive cut points of each file, from its start (with each
    file's stamp as listed, from `stamps`)."""
    segments: list[Segment] = []
    for path, offsets in sorted(cuts.items()):
        starts = [0, *offsets[:-1]] if offsets else []
        stamp = (stamps or {}).get(path)
        segments.extend(
            Segment(path, s, e, counting, stamp) for s, e in zip(starts, offsets, strict=True)
        )
    return segments


def read_chunks(f: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of an open file (fewer at its end), in chunks of up to 8 MiB."""
    if start:
        f.seek(start)
    left = end - start
    while left > 0:
        chunk = f.read(min(_READ_CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def count_segment(segment: Segment) -> Counted:
    """Counts the newlines in one segment and, for CSV, the effect of its quote runs.

    A quote run that starts in the segment counts whole, even past its end (its length decides
    what it does); one that started before the segment belongs to the segment before.

    Raises:
      DataError: when the file is gone, changed or shorter than when the conversion was
        planned.
    """
    with reading_input(segment.path, segment.stamp):
        return _count(segment)


def count_segment_in_worker(segment: Segment) -> Counted:
    """`count_segment` in a Beam step: a DataError reaches the launcher by its type."""
    with raised_for_launcher():
        return count_segment(segment)


def _count(segment: Segment) -> Counted:
    newlines = 0
    opened = FileSystems.open(segment.path, compression_type=CompressionTypes.UNCOMPRESSED)
    if segment.counting.cr_lines:
        opened = opened_as_lf(opened)
    with opened as f:
        scanner = None
        counting = segment.counting
        if counting.quotes:
            previous = -1
            if segment.start:
                f.seek(segment.start - 1)
                previous = (f.read(1) or _cut_short(segment, f"before byte {segment.start:,}"))[0]
            scanner = QuoteScanner(False, previous, counting.delimiter)
        position, last = segment.start, b""
        skip = counting.leading_lines if segment.start == 0 else 0
        for chunk in read_chunks(f, segment.start, segment.end):
            newlines += chunk.count(b"\n")
            scanned = chunk
            while skip and scanned:  # leading lines are not CSV: no quote state in them
                newline = scanned.find(b"\n")
                scanned = b"" if newline < 0 else scanned[newline + 1 :]
                skip -= newline >= 0
            if scanner is not None and scanned:
                scanner.feed(scanned, position + len(chunk) - len(scanned))
            position, last = position + len(chunk), chunk[-1:]
        if position < segment.end:
            _cut_short(segment, f"at byte {position:,}")
        if scanner is not None:
            if last == b'"':  # a run that reaches the segment's end: read on to its end
                while (more := f.read(4096)) and more[0] == QUOTE:
                    quotes = more[: len(more) - len(more.lstrip(b'"'))]
                    scanner.feed(quotes, position)
                    position += len(quotes)
                    if len(quotes) < len(more):
                        break
            scanner.finish()
    return Counted(segment, scanner.effect if scanner else QuoteEffect(), newlines)


def _cut_short(segment: Segment, ends: str) -> NoReturn:
    raise DataError(
        f"{segment.path}: the input file ends {ends}, short of byte {segment.end:,} where the "
        "plan cut it: it was cut short while the conversion ran; nothing was published: "
        "convert it again once it is complete"
    )


def count_lines_to(chunks: Iterable[bytes], offsets: Sequence[int]) -> list[int]:
    """Newlines in a byte stream before each of the ascending `offsets` (stream positions).

    One pass: each chunk's newline positions are found once and the offsets inside it looked
    up by binary search, so many offsets (a dirty file's bad rows) cost no more than a few.
    """
    wanted = np.asarray(offsets, dtype=np.int64)
    found = np.empty(len(wanted), dtype=np.int64)
    passed, position, i = 0, 0, 0
    for chunk in chunks:
        end = position + len(chunk)
        j = int(np.searchsorted(wanted, end, side="right"))
        if j == i:  # no offset in this chunk: its newlines are only counted
            passed += chunk.count(b"\n")
        else:
            newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == _NEWLINE)
            found[i:j] = passed + np.searchsorted(newlines, wanted[i:j] - position)
            passed += len(newlines)
            i = j
        position = end
        if i == len(wanted):
            break
    found[i:] = passed
    return found.tolist()
