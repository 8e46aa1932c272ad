"""A conversion's inputs as the plan sees them: files, the pieces of them each writer reads, the
bytes a piece's records turned out to cover, and what tells a file from the one listed."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from collections.abc import Iterator

from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import DataError
from beam_jobs.core.paths import stored_path

__all__ = ["Covered", "InputFile", "Piece", "Stamp", "reading_input", "stamp_of"]


@dataclasses.dataclass(frozen=True)
class Stamp:
    """What tells a file from the one listed: its stored size and the time the file system
    says it last changed (seconds since the epoch; on Cloud Storage, when the object was
    last written, which every new generation changes)."""

    size: int
    modified: float | None

    def describe(self) -> str:
        when = (
            "?"
            if self.modified is None
            else datetime.datetime.fromtimestamp(self.modified, datetime.timezone.utc).isoformat(
                timespec="milliseconds"
            )
        )
        return f"{self.size:,} bytes, modified {when}"


def stamp_of(path: str) -> Stamp:
    """The file's stamp as its file system reports it now; OSError (or Beam's IO error) when
    it is gone."""
    path = stored_path(path)  # a ZIP member: its archive's
    found = FileSystems.get_filesystem(path).metadata(path)
    return Stamp(found.size_in_bytes, found.last_updated_in_seconds)


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
    stamp: Stamp | None = None  # as listed (`size` is the planned bytes, a format may trim it)


@dataclasses.dataclass(frozen=True)
class Piece:
    """Bytes [start, end) of one input file; the writer owns the records that start inside.
    `stamp`: the file as listed, which the writer checks before and after reading."""

    path: str
    start: int
    end: int
    file_size: int
    stamp: Stamp | None = None


@dataclasses.dataclass(frozen=True)
class Covered:
    """The bytes [start, end) of a file that one piece's records took up, as its reader found
    them (when the format can tell). The pieces of a file must cover it end to end, each
    starting where the one before ended."""

    path: str
    start: int
    end: int
    file_size: int


def _checked(path: str, stamp: Stamp | None, error: BaseException | None = None) -> None:
    """Raises DataError when the file is gone or (with a stamp) no longer the one listed."""
    try:
        now = stamp_of(path)
    except Exception as e:  # OSError, or Beam's BeamIOError for a path that is not there
        if FileSystems.exists(stored_path(path)):
            raise  # a storage error, for the runner to retry
        cause = error or e
        raise DataError(
            f"{path}: the input file is gone: it was listed when the conversion was planned and "
            f"deleted or moved while it ran ({cause})"
        ) from cause
    if stamp is not None and now != stamp:
        raise DataError(
            f"{path}: the input file changed while it was converted (listed: "
            f"{stamp.describe()}; now: {now.describe()}); nothing was published: convert it "
            "again once it is complete"
        ) from error


@contextlib.contextmanager
def reading_input(path: str, stamp: Stamp | None = None) -> Iterator[None]:
    """Reading an input listed at planning time, in a `with` block. The file must still be
    there, and with a `stamp` still be the file listed, before and after the block; when the
    block fails, a file that is gone or changed is the reason given (a file cut short mid-read
    fails in many ways, none of which names it). Any other storage error stays as it is, for
    the runner to retry."""
    _checked(path, stamp)
    try:
        yield
    except Exception as e:
        _checked(path, stamp, e)
        raise
    _checked(path, stamp)
