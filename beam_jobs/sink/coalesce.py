"""Small record batches of one write task gathered into larger ones before encoding.

Every batch pays a fixed cost per feature in the encoder and the statistics (tens of
microseconds each), which a file of 50 rows pays as much as a batch of 50,000: a task that
reads thousands of small files would spend most of its time there. Consecutive batches are
joined until they hold MIN_ROWS rows; the rows keep their order, and each joined batch knows
which piece each of its rows came from (for the dead letter).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from beam_jobs.core.inputs import Piece
from beam_jobs.core.tasks import MIN_BATCH_ROWS

__all__ = ["MIN_ROWS", "Coalescer", "Joined", "piece_of_row"]

MIN_ROWS = MIN_BATCH_ROWS

# A joined batch and where its rows came from: (piece, rows) in row order.
Joined = tuple[pa.RecordBatch, tuple[tuple[Piece, int], ...]]


class Coalescer:
    """Joins consecutive batches of the same schema until they hold `min_rows` rows."""

    def __init__(self, min_rows: int = MIN_ROWS) -> None:
        self._min_rows = min_rows
        self._batches: list[pa.RecordBatch] = []
        self._sources: list[tuple[Piece, int]] = []
        self._rows = 0

    def add(self, batch: pa.RecordBatch, piece: Piece) -> Iterator[Joined]:
        """Takes a batch; yields the joined batches that are full (a large batch on its own)."""
        if self._batches and batch.schema != self._batches[0].schema:
            yield from self.flush()
        if not self._batches and batch.num_rows >= self._min_rows:
            yield batch, ((piece, batch.num_rows),)  # no copy for a batch large enough
            return
        self._batches.append(batch)
        self._sources.append((piece, batch.num_rows))
        self._rows += batch.num_rows
        if self._rows >= self._min_rows:
            yield from self.flush()

    def flush(self) -> Iterator[Joined]:
        """Yields what is held, joined (nothing when nothing is)."""
        if not self._batches:
            return
        batches, sources = self._batches, tuple(self._sources)
        self._batches, self._sources, self._rows = [], [], 0
        yield (batches[0] if len(batches) == 1 else pa.concat_batches(batches)), sources


def piece_of_row(sources: tuple[tuple[Piece, int], ...], row: int) -> Piece:
    """The piece a joined batch's `row` came from."""
    for piece, rows in sources:
        if row < rows:
            return piece
        row -= rows
    raise IndexError(row)
