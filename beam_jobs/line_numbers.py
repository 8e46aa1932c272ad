"""Line numbers for the bad rows of line-based inputs (CSV, JSON lines).

Readers place a bad row by its byte offset. Its line is 1 + the newlines before that offset:
those before the writer's piece come from the cut counts, and those inside the piece are
counted by reading the piece once more up to its last bad row, only when it had bad rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from beam_jobs.cut_counts import CutCounts, count_lines_to
from beam_jobs.dead_letter import BadRow
from beam_jobs.formats.base import compression_of, open_input
from beam_jobs.shard_plan import Piece

__all__ = ["with_line_numbers"]

_READ_CHUNK = 8 << 20


def with_line_numbers(
    rows: Sequence[BadRow], pieces: Sequence[Piece], counts: CutCounts | None
) -> list[BadRow]:
    """`rows` with `line` set where the row's byte offset is known.

    Args:
      rows: bad rows of one shard, from the files of `pieces`.
      pieces: the shard's pieces; a shard holds at most one piece of a file.
      counts: newlines before each cut point (None when no file was cut).
    """
    counts = counts or CutCounts()
    lines: dict[tuple[str, int], int] = {}
    for piece in pieces:
        offsets = sorted({r.offset for r in rows if r.path == piece.path and r.offset is not None})
        if not offsets:
            continue
        before = counts.newlines_before(piece.path, piece.start)
        found = count_lines_to(_read_from(piece), [o - piece.start for o in offsets])
        lines.update(((piece.path, o), before + n + 1) for o, n in zip(offsets, found))
    return [
        dataclasses.replace(r, line=lines[(r.path, r.offset)]) if (r.path, r.offset) in lines else r
        for r in rows
    ]


def _read_from(piece: Piece) -> Iterator[bytes]:
    """The piece's file from the piece's start to its end (decompressed, for a whole file)."""
    with open_input(piece.path, compression_of(piece.path)) as f:
        if piece.start:
            f.seek(piece.start)
        while chunk := f.read(_READ_CHUNK):
            yield chunk
