"""Listing a conversion's inputs: files, folders and glob patterns, local or gs://."""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
from collections.abc import Sequence
from typing import Any

from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import UsageError
from beam_jobs.core.inputs import InputFile, Stamp
from beam_jobs.core.paths import is_local

__all__ = ["list_inputs"]

_GLOB_CHARS = set("*?[")
_log = logging.getLogger(__name__)


def _is_folder(pattern: str, matched: list[Any]) -> bool:
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


def _exists_as_typed(pattern: str) -> bool:
    """A pattern with glob characters that is also the name of a file: that file is meant
    (`data[1].csv`, `report?.csv`), not what the pattern would match."""
    if not _GLOB_CHARS & set(pattern):
        return False
    if is_local(pattern):
        return os.path.isfile(pattern)
    return FileSystems.exists(pattern)


def _variants(pattern: str) -> list[str]:
    """The pattern, and with `**/` matching no folder as well as some (as Python's glob and
    bash's globstar do): `dir/**/*.csv` also matches `dir/a.csv`, which Beam's `**` (any
    characters, so at least the two slashes around it) would not."""
    found = [pattern]
    for i, variant in enumerate(found):
        if i > 64:
            break
        at = variant.find("**/")
        while at >= 0:
            if at == 0 or variant[at - 1] == "/":
                shorter = variant[:at] + variant[at + 3 :]
                if shorter not in found:
                    found.append(shorter)
            at = variant.find("**/", at + 1)
    return found


def _match(pattern: str) -> list[Any]:
    """The files a pattern names (Beam's FileMetadata): the file typed, or every match."""
    if _exists_as_typed(pattern):
        return [FileSystems.get_filesystem(pattern).metadata(pattern)]
    if _GLOB_CHARS & set(pattern) and is_local(pattern) and "://" not in pattern:
        pattern = os.path.abspath(pattern)  # Beam lists no folder for `**/*.csv` alone
    matched: dict[str, object] = {}
    for result in FileSystems.match(_variants(pattern)):
        for meta in result.metadata_list:
            matched.setdefault(meta.path, meta)
    return list(matched.values())


def list_inputs(patterns: Sequence[str], exclude: str | None = None) -> list[InputFile]:
    """Expands files, folders (all files below) and glob patterns into files sorted by path.

    A pattern that is the name of an existing file, glob characters and all, is that file;
    `**/` matches any number of folders, none included, as in Python's `glob(recursive=True)`.

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
    for pattern in patterns:
        matched = _match(pattern)
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
            stamp = Stamp(meta.size_in_bytes, modified)
            found = InputFile(path, meta.size_in_bytes, None, modified, stamp)
            if files.setdefault(_file_identity(meta.path), found) is not found:
                _log.info("%s is a file already listed (a link to it, or a second match)", path)
    if skipped:
        _log.info("left out %d file(s) under the output folder %s", skipped, exclude)
    return sorted(files.values(), key=lambda f: f.path)
