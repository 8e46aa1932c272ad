"""Where a path lives: on this machine's disk, or in one of Beam's other file systems (gs://)."""

from __future__ import annotations

import os

from apache_beam.io.filesystems import FileSystems

__all__ = ["is_local", "worker_path"]


def is_local(path: str) -> bool:
    """True for a path on local disk (no scheme, or file://)."""
    return FileSystems.get_scheme(path) in (None, "file")


def worker_path(path: str) -> str:
    """`path` as workers must see it: a local path made absolute, since a worker's current
    folder is its own (a Dask worker started elsewhere would write a relative output there)."""
    if is_local(path) and "://" not in path:
        return os.path.abspath(path)
    return path
