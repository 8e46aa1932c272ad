"""A conversion's inputs as the plan sees them: files, the pieces of them each writer reads, and
the bytes a piece's records turned out to cover."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import DataError

__all__ = ["Covered", "InputFile", "Piece", "input_gone"]


@dataclasses.dataclass(frozen=True)
class InputFile:
    """An input file and its size in bytes.

    `cuts` says where a shard boundary may fall inside the file: None anywhere (the writer moves
    it to the next record start), otherwise only at these offsets (Parquet row groups), and
    nowhere inside for `()` (a compressed file or an image, read whole by one writer).
    `modified` is when the file system says it last changed (seconds since the epoch): with the
    size, what tells an edited input from the one converted before.
    """

    path: str
    size: int
    cuts: tuple[int, ...] | None = None
    modified: float | None = None


@dataclasses.dataclass(frozen=True)
class Piece:
    """Bytes [start, end) of one input file; the writer owns the records that start inside."""

    path: str
    start: int
    end: int
    file_size: int


@dataclasses.dataclass(frozen=True)
class Covered:
    """The bytes [start, end) of a file that one piece's records took up, as its reader found
    them (when the format can tell). The pieces of a file must cover it end to end, each
    starting where the one before ended."""

    path: str
    start: int
    end: int
    file_size: int


@contextlib.contextmanager
def input_gone(path: str) -> Iterator[None]:
    """Reading an input listed at planning time: an OSError because the file is gone since is
    a DataError naming it; any other storage error stays as it is, for the runner to retry."""
    try:
        yield
    except OSError as e:
        if FileSystems.exists(path):
            raise
        raise DataError(
            f"{path}: the input file is gone: it was listed when the conversion was planned and "
            f"deleted or moved while it ran ({e})"
        ) from e
