"""Finished work, kept for a rerun: each task of a conversion (a write task, a unit of the
shuffle, the join of a shard's parts) commits its output once it is complete, and a rerun of
the same conversion reuses it after checking its files.

A task runs as an *attempt* with an id of its own, which every file it writes carries in its
name (`attempt_name`: `<stem>~<attempt><suffix>`). It commits by writing one record last,
`done/<task>~<attempt>.commit`: what it hands on (its `WrittenShard`s or `WrittenRuns`) and
each of its files with its size and CRC32C, sealed by the record's own CRC32C. A record cut
short (a crash while it was written) or damaged does not load, and counts as none. A record
is good only while every file it lists is as recorded, or was consumed by a later task (a
part joined into its shard) whose own record is good. The files of attempts that never
committed (a task cut short by a signal, a crash or a full disk) are the only ones a rerun
removes (`remove_uncommitted`).

Records are pickled (what Beam pickles to send the same values between stages); they are ours,
in the run's own folder, and read only by the same version of this tool (the folder's name is
a digest of the conversion, the version included).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import pickle
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.paths import is_local
from beam_jobs.sink.run_files import write_at_once

__all__ = [
    "COUNTS_NAME",
    "DONE_DIR",
    "KeptFile",
    "Record",
    "attempt_name",
    "attempt_of",
    "commit",
    "committed_attempts",
    "delete_present",
    "file_crc32c",
    "is_task_record",
    "join_key",
    "keep_value",
    "kept_value",
    "new_attempt",
    "part_file",
    "remove_uncommitted",
    "reuse",
    "unit_key",
    "write_task_key",
]

DONE_DIR = "done"  # in the work folder: one record a committed attempt
_SUFFIX = ".commit"
_ATTEMPT = re.compile(r"~([0-9a-f]{16})(?=[.]|$)")
_CHUNK = 8 << 20


_WRITE, _UNIT = "write-", "unit-"


def write_task_key(task: int) -> str:
    """The record name of a write task."""
    return f"{_WRITE}{task:05d}"


def unit_key(split: str | None, shard: int, part: int) -> str:
    """The record name of the shuffle's unit that writes part `part` of a shard."""
    return f"{_UNIT}{split or ''}-{shard:05d}-{part}"


def is_task_record(path: str) -> bool:
    """Whether a file is the record of a task as `Counts.tasks` counts them (a write task or a
    unit; a join is none)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(_SUFFIX) and name.startswith((_WRITE, _UNIT))


def join_key(split: str | None, shard: int) -> str:
    """The record name of the join of a shard's parts."""
    return f"join-{split or ''}-{shard:05d}"


def new_attempt() -> str:
    """A new attempt's id: 16 hex digits."""
    return uuid.uuid4().hex[:16]


def attempt_name(stem: str, attempt: str, suffix: str = "") -> str:
    """The name of a file an attempt writes: its attempt's id after `stem`, then `suffix`."""
    return f"{stem}~{attempt}{suffix}"


def attempt_of(name: str) -> str | None:
    """The attempt id in a file's name (None: not a file of an attempt)."""
    found = _ATTEMPT.search(name.rsplit("/", 1)[-1])
    return found.group(1) if found else None


@dataclasses.dataclass(frozen=True)
class KeptFile:
    """A file a committed attempt wrote: its path, size and CRC32C, and the task that consumes
    it (a join that appends a part to another and deletes it; "": none before publishing).
    `kept`: a part its join may append to in place, the size and CRC32C of what the join keeps
    of it (`part_file`); the part stays good while they are intact, whatever follows them (a
    join cut short while it appended, which truncates to them before it appends again)."""

    path: str
    bytes: int
    crc32c: str
    consumer: str = ""
    kept: tuple[int, str] | None = None


def part_file(
    path: str, size: int, crc32c: str, consumer: str, member: tuple[int, int, int, int] | None
) -> KeptFile:
    """A part of a shard that `consumer` joins: its join keeps all its bytes in place and
    appends the other parts', or of a GZIP part (`member`: `codec.gzip_member.OpenMember`'s
    fields) its bytes up to the sync flush."""
    if not consumer:
        return KeptFile(path, size, crc32c)
    kept = (member[0], f"{member[1]:08x}") if member else (size, crc32c)
    return KeptFile(path, size, crc32c, consumer, kept)


@dataclasses.dataclass(frozen=True)
class Record:
    """What a committed attempt of `task` handed on (`value`), and its files."""

    task: str
    attempt: str
    value: Any
    files: tuple[KeptFile, ...]


def _done(folder: str, name: str = "") -> str:
    return FileSystems.join(folder, DONE_DIR, name) if name else FileSystems.join(folder, DONE_DIR)


def _sealed(value: Any) -> bytes:
    """A value pickled behind its CRC32C (4 bytes, big endian), so that damage is seen."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return google_crc32c.value(data).to_bytes(4, "big") + data


def _unsealed(data: bytes) -> Any:
    """What `_sealed` sealed. Raises ValueError when it is not as sealed (cut short, or
    damaged: a pickle with a changed byte may still load, into a wrong value)."""
    if len(data) < 4 or google_crc32c.value(data[4:]).to_bytes(4, "big") != data[:4]:
        raise ValueError("not as sealed")
    return pickle.loads(data[4:])


def commit(folder: str, task: str, attempt: str, value: Any, files: Iterable[KeptFile]) -> None:
    """Records that `task`'s `attempt` is complete (one file, written at once and sealed by
    its CRC32C: a record is whole or not there, and a damaged one is as none)."""
    record = Record(task, attempt, value, tuple(files))
    write_at_once(_done(folder, attempt_name(task, attempt, _SUFFIX)), _sealed(record))


@functools.lru_cache(maxsize=8)
def _kept(folder: str, run: str) -> dict[str, tuple[str, ...]]:
    """The records a work folder held when this process first looked for run `run`, by task
    (one listing a process and run, whatever the number of tasks: what a rerun may reuse; a
    record this run makes later is its own, never looked for again)."""
    try:
        found = FileSystems.match([_done(folder, "*" + _SUFFIX)])[0].metadata_list
    except Exception:  # no folder yet (a first run): nothing kept
        return {}
    by_task: dict[str, list[str]] = {}
    for meta in found:
        name = meta.path.rsplit("/", 1)[-1]
        by_task.setdefault(name.split("~", 1)[0], []).append(meta.path)
    return {task: tuple(sorted(paths)) for task, paths in by_task.items()}


def _records(folder: str, task: str, run: str) -> tuple[str, ...]:
    return _kept(folder, run).get(task, ())


def _load(path: str) -> Record | None:
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            record = _unsealed(f.read())
    except Exception:  # unreadable or damaged: as good as none (the task runs again)
        return None
    return record if isinstance(record, Record) else None


def reuse(folder: str, task: str, run: str = "") -> Any | None:
    """What a committed attempt of `task` handed on, when its record and files are good;
    None: the task has to run (again). `run`: the run that asks (the records are listed once
    a process and run)."""
    for path in _records(folder, task, run):
        record = _load(path)
        if record is not None and record.task == task and _good(folder, record, run):
            return record.value
    return None


def _good(folder: str, record: Record, run: str) -> bool:
    """Every file as recorded, or consumed by a task whose record is good."""
    consumers: dict[str, bool] = {}
    for kept in record.files:
        if _intact(kept):
            continue
        if not kept.consumer:
            return False
        if kept.consumer not in consumers:
            consumers[kept.consumer] = any(
                (found := _load(path)) is not None and _intact_all(found.files)
                for path in _records(folder, kept.consumer, run)
            )
        if not consumers[kept.consumer]:
            return False
    return True


def _intact_all(files: Sequence[KeptFile]) -> bool:
    return all(_intact(kept) for kept in files)


def _intact(kept: KeptFile) -> bool:
    try:
        size, crc = file_crc32c(kept.path, kept.bytes)
        if (size, crc) == (kept.bytes, kept.crc32c):
            return True
        # Only local joins append in place (elsewhere they write a new file).
        return (
            kept.kept is not None
            and is_local(kept.path)
            and size >= kept.kept[0]
            and (_prefix_crc32c(kept.path, kept.kept[0]) == kept.kept[1])
        )
    except OSError:  # gone (Beam's file systems raise BeamIOError, an OSError, too)
        return False


def _prefix_crc32c(path: str, size: int) -> str:
    """The CRC32C of a local file's first `size` bytes."""
    crc = 0
    with open(path, "rb") as f:
        while size > 0 and (chunk := f.read(min(_CHUNK, size))):
            crc = google_crc32c.extend(crc, chunk)
            size -= len(chunk)
    return f"{crc:08x}"


def file_crc32c(path: str, expected_bytes: int | None = None) -> tuple[int, str]:
    """A file's size and CRC32C (8 hex digits); with `expected_bytes`, a file of another size
    is not read (its CRC32C is then ""). On Cloud Storage, the CRC32C the store keeps of every
    object (one request instead of reading it: a terabyte's check costs metadata)."""
    if expected_bytes is not None:
        size = _size(path)
        if size != expected_bytes:
            return size, ""
        stored = None if is_local(path) else _stored_crc32c(path)
        if stored is not None:
            return size, stored
    crc, size = 0, 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        while chunk := f.read(_CHUNK):
            crc = google_crc32c.extend(crc, chunk)
            size += len(chunk)
    return size, f"{crc:08x}"


def _stored_crc32c(path: str) -> str | None:
    """The CRC32C a store keeps of an object (Cloud Storage's: base64 of its 4 bytes, big
    endian), as 8 hex digits; None when it keeps none."""
    try:
        stored = FileSystems.checksum(path)
        return base64.b64decode(stored).hex() if stored else None
    except (OSError, ValueError, TypeError):
        return None


def _size(path: str) -> int:
    if is_local(path):
        return os.path.getsize(path)
    found = FileSystems.match([path])[0].metadata_list
    if not found:
        raise FileNotFoundError(path)
    return int(found[0].size_in_bytes)


COUNTS_NAME = "cut_counts.pickle"  # the counts before each cut: a function of the plan


def keep_value(folder: str, name: str, value: Any) -> Any:
    """Keeps a value the run made once for all its tasks (the counts before each cut) in the
    work folder, for a rerun; returns it."""
    write_at_once(FileSystems.join(folder, name), _sealed(value))
    return value


def kept_value(folder: str, name: str) -> Any | None:
    """A value `keep_value` kept (None: none, or cut short or damaged)."""
    try:
        with FileSystems.open(
            FileSystems.join(folder, name), compression_type=CompressionTypes.UNCOMPRESSED
        ) as f:
            return _unsealed(f.read())
    except Exception:  # none, or unreadable: made again
        return None


def committed_attempts(folder: str) -> set[str]:
    """The ids of every attempt with a record (one listing)."""
    try:
        found = FileSystems.match([_done(folder, "*" + _SUFFIX)])[0].metadata_list
    except Exception:
        return set()
    return {a for a in (attempt_of(m.path) for m in found) if a}


def remove_uncommitted(folder: str, listing: Iterable[str]) -> list[str]:
    """Deletes the files of `listing` (paths below `folder`) written by attempts that never
    committed; returns them."""
    done = committed_attempts(folder)
    gone = []
    for path in listing:
        attempt = attempt_of(path)
        if attempt is not None and attempt not in done:
            gone.append(path)
    if gone:
        delete_present(gone)
    return gone


def delete_present(paths: Sequence[str]) -> None:
    """Deletes the files; one already gone is no error (a task of a stopping run may delete
    its own file between a listing and this)."""
    try:
        FileSystems.delete(list(paths))
    except Exception:
        left = [path for path in paths if FileSystems.exists(path)]
        if left:
            FileSystems.delete(left)
