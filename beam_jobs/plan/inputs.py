"""Listing a conversion's inputs: files, folders and glob patterns, local or gs://."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence

from apache_beam.io.filesystems import FileSystems

from beam_jobs.errors import UsageError
from beam_jobs.plan.shards import InputFile

__all__ = ["list_inputs"]

_GLOB_CHARS = set("*?[")


def _is_folder(pattern: str, matched: list) -> bool:
    if _GLOB_CHARS & set(pattern):
        return False
    if not matched:
        return True  # gs://bucket/folder matches no object of its own
    return len(matched) == 1 and os.path.isdir(pattern)


def list_inputs(patterns: Sequence[str]) -> list[InputFile]:
    """Expands files, folders (all files below) and glob patterns into files sorted by path.

    Hidden files (a name starting with '.') are left out. Every pattern must match something.

    Raises:
      UsageError: naming a pattern that matches no file.
    """
    files: dict[str, int] = {}
    for pattern, result in zip(patterns, FileSystems.match(list(patterns))):
        matched = result.metadata_list
        if _is_folder(pattern, matched):
            matched = FileSystems.match([pattern.rstrip("/") + "/**"])[0].metadata_list
        matched = [m for m in matched if not posixpath.basename(m.path).startswith(".")]
        if not matched:
            raise UsageError(f"--input {pattern!r} matches no files")
        for meta in matched:
            files[meta.path] = meta.size_in_bytes
    return [InputFile(path, size) for path, size in sorted(files.items())]
