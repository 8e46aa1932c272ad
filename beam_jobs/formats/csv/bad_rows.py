"""Placing a CSV range's bad rows at their byte offsets.

pyarrow reports a malformed row by its record number and a row that fails conversion by its
index among the well-formed rows; both become the offset where the row starts in the file.
"""

from __future__ import annotations

import bisect

import numpy as np

from beam_jobs.core.bad_rows import BadRow

__all__ = ["place_bad_rows"]


def place_bad_rows(
    starts: np.ndarray,
    malformed_rows: list[tuple[BadRow, int | None]],
    typed_rows: list[BadRow],
    header: bool,
) -> list[BadRow]:
    """Bad rows with their byte offsets, in file order.

    pyarrow numbers records from 1 (the header included, blank lines not), and a row that
    fails conversion is known by its index among the well-formed rows; `starts` holds the
    offset of every non-blank record of the range.
    """
    skipped = sorted(number - 1 for _, number in malformed_rows if number)

    def record_of(well_formed: int) -> int:
        # The index among all records, past the header and the malformed records before it.
        wanted = well_formed + (1 if header else 0)
        index = wanted
        while True:
            before = bisect.bisect_right(skipped, index)
            if index - before == wanted and (before == 0 or skipped[before - 1] != index):
                return index
            index = wanted + before

    placed = []
    for bad, number in malformed_rows:
        placed.append((number - 1 if number else None, bad))
    for bad in typed_rows:
        # A row that failed conversion has its index among the well-formed rows.
        placed.append((record_of(bad.row or 0), bad))
    result = []
    for index, bad in sorted(placed, key=lambda p: (p[0] is None, p[0] or 0)):
        offset = int(starts[index]) if index is not None and index < len(starts) else None
        result.append(bad.placed(offset, bad.line))
    return result
