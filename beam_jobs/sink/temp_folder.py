"""A conversion's work folder in the output: `.tfrecord-etl-tmp-<id>/`, holding the run marker
that proves it is ours and names the run that holds it, the shards, runs and dead letters written
under temporary names, the records of finished tasks (`commits`) and progress notes. Publishing
renames what it keeps and removes the folder; a run that fails leaves it, and a rerun of the same
conversion takes it over (the launcher names the folder after the conversion: `job.resume`).

The marker (`run.json`): {"tool": "tfrecord-etl", "work": <id>, "run_id": <the run that holds it,
"" once that run stopped>, "key": <the digest of the conversion, for a rerun to compare>}; it
stays small, since every task reads it. Every task
checks it holds its own run's id before it starts and before it commits (`stop_if_abandoned`):
a cluster may go on running tasks of a run whose launcher ended or was replaced.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.paths import is_local, is_missing
from beam_jobs.sink.progress import NOTES_DIR
from beam_jobs.sink.run_files import TEMP_DIR_PREFIX, write_at_once

__all__ = [
    "RUN_MARKER",
    "TEMP_DIR_PREFIX",
    "RunAbandoned",
    "holds_our_marker",
    "is_temp_folder_name",
    "mark_stopped",
    "read_marker",
    "remove_folder",
    "start_temp_folder",
    "stop_if_abandoned",
]

RUN_MARKER = "run.json"  # in a temporary folder: proves it is ours
REMOVE_ROUNDS = 5  # `remove_folder`'s tries on local disk
_TOOL = "tfrecord-etl"
_TEMP_DIR_RE = re.compile(rf"^{re.escape(TEMP_DIR_PREFIX)}[0-9a-f]+$")


def is_temp_folder_name(name: str) -> bool:
    """Whether a folder's name is a temporary folder's (its marker proves it is ours)."""
    return bool(_TEMP_DIR_RE.fullmatch(name))


def start_temp_folder(output: str, work: str, run_id: str, key: str = "") -> str:
    """Creates (or takes over) the work folder `.tfrecord-etl-tmp-<work>` with a marker held by
    `run_id` (`key`: the conversion's digest); returns the folder's path."""
    folder = FileSystems.join(output, TEMP_DIR_PREFIX + work)
    if is_local(folder):  # with the writers' notes folder, which they never make themselves
        os.makedirs(FileSystems.join(folder, NOTES_DIR), exist_ok=True)
    _write_marker(folder, {"tool": _TOOL, "work": work, "run_id": run_id, "key": key})
    return folder


def _write_marker(folder: str, marker: dict[str, Any]) -> None:
    """Writes the marker at once (a task never reads half of one); FileNotFoundError when the
    local folder is gone (it is never made again here)."""
    data = json.dumps(marker, sort_keys=True).encode("utf-8")
    write_at_once(FileSystems.join(folder, RUN_MARKER), data)


def read_marker(folder: str) -> dict[str, Any] | None:
    """The folder's marker, when it holds one of ours (None: none, or not ours)."""
    path = FileSystems.join(folder, RUN_MARKER)
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            marker = json.loads(f.read(1 << 20))
    except ValueError:  # not JSON: not ours
        return None
    except Exception as e:
        if isinstance(e, OSError) or is_missing(e):
            return None
        raise
    if not isinstance(marker, dict) or marker.get("tool") != _TOOL:
        return None
    return marker


def holds_our_marker(output: str, folder: str) -> bool:
    """Whether the folder's run marker is one `start_temp_folder` writes for the folder (a file
    of that name alone proves nothing: the folder may be a user's own). Runs before
    2026-12-07 named the folder after their run id."""
    marker = read_marker(FileSystems.join(output, folder))
    suffix = folder.removeprefix(TEMP_DIR_PREFIX)
    return marker is not None and suffix in (marker.get("work"), marker.get("run_id"))


def mark_stopped(folder: str) -> bool:
    """Says in the folder's marker that no run holds it any more: its tasks stop at their next
    check. False when there is no marker to change (the folder is gone: published)."""
    marker = read_marker(folder)
    if marker is None:
        return False
    try:
        _write_marker(folder, {**marker, "run_id": ""})
    except FileNotFoundError:  # removed meanwhile
        return False
    return True


class RunAbandoned(RuntimeError):
    """A task of a run that no longer holds its folder (interrupted, failed, or taken over by
    a rerun): it writes nothing more."""


# A marker found to name the task's run is read again after this many seconds at the most: a
# task that stops a second late commits finished work, which is harmless; a read a task is
# one more small file opened per task (20,000-shard runs open tens of thousands).
HELD_SECONDS = 1.0
_held: dict[tuple[str, str], float] = {}  # (folder, run) -> when its marker last named it


def stop_if_abandoned(
    marker: str | None,
    temp_dir: str,
    written: list[str | None],
    run_id: str = "",
    max_age: float | None = None,
) -> None:
    """Stops a task of a run that no longer holds its work folder (its marker names another
    run, or none), and deletes what it wrote: a cluster may go on running tasks after the
    launcher ended, and they would leave files that no record lists. `max_age`: a marker
    that named the run this recently is not read again (0: always read; default
    HELD_SECONDS)."""
    if marker is None:
        return
    seen = _held.get((temp_dir, run_id))
    limit = HELD_SECONDS if max_age is None else max_age
    if seen is not None and time.monotonic() - seen < limit:
        return
    held = read_marker(temp_dir)
    if held is not None and held.get("run_id") == run_id:
        _held[(temp_dir, run_id)] = time.monotonic()
        return
    _held.pop((temp_dir, run_id), None)
    paths = [p for p in written if p and FileSystems.exists(p)]
    if paths:
        FileSystems.delete(paths)
    raise RunAbandoned(f"{temp_dir}: the run was stopped; this task stopped")


def remove_folder(path: str) -> None:
    """Deletes a folder and everything below it, on any file system.

    On GCS a folder is only a name prefix (it never "exists" by itself), so what decides is
    whether anything is listed below it.
    """
    path = path.rstrip("/")
    if is_local(path):
        # A writer that outlives an interrupted run may add a file while the tree is being
        # removed (it can no longer once the folder is gone: `create_run_file`): again.
        for _ in range(REMOVE_ROUNDS):
            if not os.path.lexists(path):
                return
            shutil.rmtree(path, ignore_errors=True)
        if FileSystems.exists(path):
            FileSystems.delete([path])  # raises what keeps it
    elif FileSystems.match([path + "/**"])[0].metadata_list:
        FileSystems.delete([path + "/"])  # every object under the prefix
