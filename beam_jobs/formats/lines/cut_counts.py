"""Quote and newline bytes before each cut point of a line-based input file.

A CSV writer whose byte range starts mid-file needs the number of quote bytes before its start
to find its first record (quote parity, see `csv_ranges`); every writer of a line-based format
needs the number of newlines before its start to give a bad row's line number. Both come from
one read of the bytes before each cut, split into segments between consecutive cuts that are
counted in parallel (about a GB/s per core) and summed per file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.formats.csv.record_starts import count_quotes

__all__ = [
    "CutCounts",
    "Segment",
    "count_lines_to",
    "count_segment",
    "read_chunks",
    "segments_between_cuts",
]

_READ_CHUNK = 8 << 20


@dataclasses.dataclass(frozen=True)
class Segment:
    """Bytes [start, end) of a file to count; `end` is a cut point."""

    path: str
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Counted:
    segment: Segment
    quotes: int
    newlines: int


@dataclasses.dataclass(frozen=True)
class CutCounts:
    """Per file, the quote and newline bytes before each cut point (0 at offset 0)."""

    quotes: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)
    newlines: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_counted(cls, counted: Iterable[Counted]) -> CutCounts:
        """Running sums of the segments' counts, file by file."""
        counts = cls()
        for c in sorted(counted, key=lambda c: (c.segment.path, c.segment.start)):
            path, start, end = c.segment.path, c.segment.start, c.segment.end
            quotes = counts.quotes.setdefault(path, {})
            newlines = counts.newlines.setdefault(path, {})
            quotes[end] = quotes.get(start, 0) + c.quotes
            newlines[end] = newlines.get(start, 0) + c.newlines
        return counts

    def quotes_before(self, path: str, offset: int) -> int:
        return 0 if offset == 0 else self.quotes[path][offset]

    def newlines_before(self, path: str, offset: int) -> int:
        return 0 if offset == 0 else self.newlines[path][offset]


def segments_between_cuts(cuts: dict[str, list[int]]) -> list[Segment]:
    """The segments between consecutive cut points of each file, from its start."""
    segments = []
    for path, offsets in sorted(cuts.items()):
        starts = [0, *offsets[:-1]]
        segments.extend(Segment(path, s, e) for s, e in zip(starts, offsets))
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
    """Counts the quote and newline bytes in one segment."""
    quotes = newlines = 0
    with FileSystems.open(segment.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for chunk in read_chunks(f, segment.start, segment.end):
            quotes += count_quotes(chunk)
            newlines += chunk.count(b"\n")
    return Counted(segment, quotes, newlines)


def count_lines_to(chunks: Iterable[bytes], offsets: Sequence[int]) -> list[int]:
    """Newlines in a byte stream before each of the ascending `offsets` (stream positions)."""
    found, passed, position, i = [], 0, 0, 0
    for chunk in chunks:
        end = position + len(chunk)
        while i < len(offsets) and offsets[i] <= end:
            found.append(passed + chunk.count(b"\n", 0, offsets[i] - position))
            i += 1
        if i == len(offsets):
            break
        passed += chunk.count(b"\n")
        position = end
    return found + [passed] * (len(offsets) - i)
