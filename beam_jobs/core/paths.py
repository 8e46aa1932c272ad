"""Where a path lives: on this machine's disk, or in one of Beam's other file systems (gs://)."""

from __future__ import annotations

import functools
import os

from apache_beam.io.filesystems import FileSystems

__all__ = ["is_local", "is_missing", "split_member", "stored_path", "worker_path"]

# `archive.zip!member.csv`: a file inside a ZIP archive (`beam_jobs.formats.zip_members`).
_MEMBER = ".zip!"


def split_member(path: str) -> tuple[str, str] | None:
    """(archive, member) of a ZIP member's path; None for any other path, and for a file
    whose own name holds `.zip!` (`sales.zip!2024.csv`): a path that exists as typed is that
    file, as for glob characters."""
    at = path.lower().find(_MEMBER)
    if at < 0 or _exists_as_typed(path):
        return None
    cut = at + len(_MEMBER) - 1
    return path[:cut], path[cut + 1 :]


def _exists_as_typed(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(path.removeprefix("file://"))
    return _stored_exists(path)


@functools.lru_cache(maxsize=4096)  # a request each: asked for every piece of a member
def _stored_exists(path: str) -> bool:
    try:
        return bool(FileSystems.exists(path))
    except Exception:  # a store that cannot say: read it as a member
        return False


def stored_path(path: str) -> str:
    """The stored file a path reads: a ZIP member's archive, else the path itself."""
    member = split_member(path)
    return member[0] if member else path


def is_local(path: str) -> bool:
    """True for a path on local disk (no scheme, or file://)."""
    return FileSystems.get_scheme(path) in (None, "file")


def worker_path(path: str) -> str:
    """`path` as workers must see it: a local path made absolute, since a worker's current
    folder is its own (a Dask worker started elsewhere would write a relative output there)."""
    if is_local(path) and "://" not in path:
        return os.path.abspath(path)
    return path


def is_missing(error: BaseException) -> bool:
    """Whether an error of a file system's read says the file is not there (locally an
    OSError; on Cloud Storage the client's NotFound, which is none)."""
    if isinstance(error, FileNotFoundError):
        return True
    try:
        from google.api_core.exceptions import NotFound
    except ImportError:  # no Cloud Storage client: only local files
        return False
    return isinstance(error, NotFound)
