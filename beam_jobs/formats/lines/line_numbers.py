"""Line numbers for the bad rows of line-based inputs (CSV, JSON lines).

Readers place a bad row by its byte offset. Its line is 1 + the newlines before that offset:
those before the writer's piece come from the cut counts, and those inside the piece are
counted by reading the piece once more up to its last bad row, only when it had bad rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.inputs import Piece
from beam_jobs.formats.compressed import compression_of, open_input
from beam_jobs.formats.lines.cut_counts import CutCounts, count_lines_to, read_chunks

__all__ = ["with_line_numbers"]


def with_line_numbers(
    rows: Sequence[BadRow], pieces: Sequence[Piece], counts: CutCounts | None, cr_lines: bool
) -> list[BadRow]:
    """`rows` with `line` set where the row's byte offset is known.

    Args:
      rows: bad rows of one shard, from the files of `pieces`.
      pieces: the shard's pieces; a shard holds at most one piece of a file.
      counts: newlines before each cut point (None when no file was cut).
      cr_lines: the files' lines end in CR alone (`Counting.cr_lines`).
    """
    counts = counts or CutCounts()
    lines: dict[tuple[str, int | None], int] = {}
    for piece in pieces:
        offsets = sorted({r.offset for r in rows if r.path == piece.path and r.offset is not None})
        if not offsets:
            continue
        before = counts.newlines_before(piece.path, piece.start)
        # A compressed file is one piece from 0, and offsets are in its decompressed bytes.
        with open_input(piece.path, compression_of(piece.path), cr_lines) as f:
            chunks = read_chunks(f, piece.start, offsets[-1])
            found = count_lines_to(chunks, [o - piece.start for o in offsets])
        lines.update(((piece.path, o), before + n + 1) for o, n in zip(offsets, found, strict=True))
    return [
        r.placed(r.offset, lines[(r.path, r.offset)]) if (r.path, r.offset) in lines else r
        for r in rows
    ]
