"""Where a path lives: on this machine's disk, or in one of Beam's other file systems (gs://)."""

from __future__ import annotations

import os

from apache_beam.io.filesystems import FileSystems

__all__ = ["is_local", "split_member", "stored_path", "worker_path"]

# `archive.zip!member.csv`: a file inside a ZIP archive (`beam_jobs.formats.zip_members`).
_MEMBER = ".zip!"


def split_member(path: str) -> tuple[str, str] | None:
    """(archive, member) of a ZIP member's path; None for any other path."""
    at = path.lower().find(_MEMBER)
    if at < 0:
        return None
    cut = at + len(_MEMBER) - 1
    return path[:cut], path[cut + 1 :]


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
