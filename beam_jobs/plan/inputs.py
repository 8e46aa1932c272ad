"""Listing a conversion's inputs: files, folders and glob patterns, local or gs://."""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
from collections.abc import Sequence

from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import UsageError
from beam_jobs.core.inputs import InputFile
from beam_jobs.core.paths import is_local

__all__ = ["list_inputs"]

_GLOB_CHARS = set("*?[")
_log = logging.getLogger(__name__)


def _is_folder(pattern: str, matched: list) -> bool:
    """A pattern without wildcards that names a folder: everything below it is an input.

    `folder/` lists only its direct files on the local file system, and a gs:// folder is a
    name prefix that matches no object of its own, so neither can be told by the match alone.
    """
    if _GLOB_CHARS & set(pattern):
        return False
    if pattern.endswith("/") or not matched:
        return True
    return is_local(pattern) and os.path.isdir(pattern)


def _identity(path: str) -> str:
    """What makes two listed paths the same file: the resolved full path, for local files."""
    return os.path.realpath(path) if is_local(path) else path


def _file_identity(path: str) -> str | tuple[int, int]:
    """What makes two listed files the same content: for local files the device and inode
    (hard links are one file under two names), else the path."""
    if is_local(path):
        with contextlib.suppress(OSError):
            found = os.stat(path)
            return (found.st_dev, found.st_ino)
    return _identity(path)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def list_inputs(patterns: Sequence[str], exclude: str | None = None) -> list[InputFile]:
    """Expands files, folders (all files below) and glob patterns into files sorted by path.

    Each file is listed once, however many patterns or names reach it (`x.csv` and
    `./x.csv`, two overlapping globs, a symbolic or hard link): local files are compared by
    device and inode, and listed by their absolute path. Hidden files (a
    name starting with '.') are left out, and so is everything under `exclude` (the
    conversion's own output folder, which may sit inside an input folder).

    Raises:
      UsageError: naming a pattern that matches no file.
    """
    excluded = _identity(exclude.rstrip("/")) if exclude else None
    files: dict[str | tuple[int, int], InputFile] = {}  # identity -> file
    skipped = 0
    for pattern, result in zip(patterns, FileSystems.match(list(patterns)), strict=True):
        matched = result.metadata_list
        if _is_folder(pattern, matched):
            matched = FileSystems.match([pattern.rstrip("/") + "/**"])[0].metadata_list
        matched = [m for m in matched if not posixpath.basename(m.path).startswith(".")]
        if excluded:
            kept = [m for m in matched if not _under(_identity(m.path), excluded)]
            skipped += len(matched) - len(kept)
            if matched and not kept:
                raise UsageError(
                    f"--input {pattern!r} matches only files under --output {exclude}; the "
                    "output of a conversion is never its input"
                )
            matched = kept
        if not matched:
            raise UsageError(f"--input {pattern!r} matches no files")
        for meta in matched:
            path = os.path.abspath(meta.path) if is_local(meta.path) else meta.path
            modified = getattr(meta, "last_updated_in_seconds", None)
            found = InputFile(path, meta.size_in_bytes, None, modified)
            if files.setdefault(_file_identity(meta.path), found) is not found:
                _log.info("%s is a file already listed (a link to it, or a second match)", path)
    if skipped:
        _log.info("left out %d file(s) under the output folder %s", skipped, exclude)
    return sorted(files.values(), key=lambda f: f.path)
