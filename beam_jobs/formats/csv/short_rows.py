"""Rows with fewer fields than the header: their missing trailing fields are missing values,
as pandas, R's `read.csv` and Excel read them (a writer that leaves out a row's trailing empty
fields: `1950:1, 28.980` under six names). Each is counted (`counts.short_rows`, a summary
warning naming the first), never dropped. A row with more fields than the header stays a dead
letter: no rule says which field is extra.

pyarrow's reader cannot fill them in: it hands each to its invalid-row handler, which keeps
its text and record number; they are parsed again with the missing delimiters added (one
parse for all of a batch's) and put back among the well-formed rows in file order.

Short rows after the last row of a file may be notes, not rows (`notes`): held to the end of
a range (a row right after a batch waits for the next), where those are left out.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from beam_jobs.formats.csv.notes import Fits, is_note
from beam_jobs.formats.csv.source import read_filled

__all__ = ["ShortRows"]


@dataclasses.dataclass
class _Held:
    text: str  # as pyarrow read it (decoded to UTF-8), no line end
    missing: int  # fields to add
    position: int  # the well-formed rows before it in the range


class ShortRows:
    """A range's short rows, held until the batch of well-formed rows they fall among.

    Args:
      names: the columns, in file order.
      delimiter: the field delimiter.
      header: whether the range starts with the header line (record 1).
    """

    def __init__(self, names: Sequence[str], delimiter: str, header: bool) -> None:
        self._names = list(names)
        self._delimiter = delimiter
        self._first = 1 + int(header)  # the number of the range's first row
        self._held: list[_Held] = []
        self._numbers: list[int] = []  # pyarrow's record numbers of every short row so far

    def add(self, number: int, text: str, missing: int, dead_before: int) -> None:
        """A short row: its record number, text, the fields it lacks, and how many rows
        before it were set aside (rows with more fields, for the dead letter)."""
        shorter = bisect.bisect_left(self._numbers, number)
        position = number - self._first - dead_before - shorter
        self._numbers.insert(shorter, number)
        self._held.append(_Held(text, missing, position))

    @property
    def count(self) -> int:
        """The short rows seen."""
        return len(self._numbers)

    @property
    def held(self) -> bool:
        return bool(self._held)

    def trailing_notes(self, well_formed: int, fits: Fits) -> int:
        """How many of the held rows are notes after the last of the range's `well_formed`
        rows (`is_note`); the caller decides whether the file ends there."""
        columns, k = len(self._names), len(self._held)
        while k and self._held[k - 1].position == well_formed:
            held = self._held[k - 1]
            if not is_note(held.text, self._delimiter, columns, fits):
                break
            k -= 1
        return len(self._held) - k

    def drop_last(self, count: int) -> list[str]:
        """Leaves out the last `count` held rows (notes: not rows, not short rows); their
        texts."""
        if not count:
            return []
        texts = [h.text for h in self._held[-count:]]
        del self._held[-count:]
        del self._numbers[-count:]
        return texts

    def merged(self, raw: pa.RecordBatch | None, before: int) -> pa.RecordBatch | None:
        """`raw` (the range's well-formed rows from number `before` on; None: no more) with
        the held rows that fall among or right after them, in file order."""
        # A row right after `raw` waits for the next batch (or the end): it may be a note.
        end = before + (raw.num_rows if raw is not None else 0)
        taken = [h for h in self._held if raw is None or h.position < end]
        if not taken:
            return raw
        self._held = [h for h in self._held if raw is not None and h.position >= end]
        filled = self._parsed(taken)
        if raw is None or raw.num_rows == 0:
            return filled
        # Well-formed row j sorts at 2j + 1, a short row before well-formed row p at 2p:
        # stable, so short rows in a row keep their order.
        keys = np.concatenate(
            [2 * np.arange(raw.num_rows) + 1, 2 * (np.array([h.position for h in taken]) - before)]
        )
        filled = pa.RecordBatch.from_arrays(filled.columns, schema=raw.schema)
        joined = pa.Table.from_batches([raw, filled]).combine_chunks()
        return joined.take(np.argsort(keys, kind="stable")).to_batches()[0]

    def _parsed(self, rows: list[_Held]) -> pa.RecordBatch:
        """The rows, their missing fields added as empty ones (missing values)."""
        table = read_filled(
            [(h.text, h.missing) for h in rows], self._names, self._delimiter, pa.binary()
        )
        if table.num_rows != len(rows):
            raise ValueError(f"{len(rows)} short rows read as {table.num_rows}")
        return table.combine_chunks().to_batches()[0]
