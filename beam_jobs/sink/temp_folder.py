"""A run's temporary folder in the output: `.tfrecord-etl-tmp-<run id>/`, holding the run marker
that proves it is ours, the shards and dead letters written under temporary names, and progress
notes; publishing renames what it keeps and removes the folder."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.paths import is_local
from beam_jobs.sink.progress import NOTES_DIR
from beam_jobs.sink.run_files import TEMP_DIR_PREFIX

__all__ = [
    "RUN_MARKER",
    "TEMP_DIR_PREFIX",
    "RunAbandoned",
    "holds_our_marker",
    "is_temp_folder_name",
    "remove_empty_folders",
    "remove_folder",
    "start_temp_folder",
    "stop_if_abandoned",
    "write_atomically",
]

RUN_MARKER = "run.json"  # in a temporary folder: proves it is ours
REMOVE_ROUNDS = 5  # `remove_folder`'s tries on local disk
_TEMP_DIR_RE = re.compile(rf"^{re.escape(TEMP_DIR_PREFIX)}[0-9a-f]+$")


def is_temp_folder_name(name: str) -> bool:
    """Whether a folder's name is a temporary folder's (its marker proves it is ours)."""
    return bool(_TEMP_DIR_RE.fullmatch(name))


def start_temp_folder(output: str, run_id: str) -> str:
    """Creates this run's temporary folder with its marker; returns the folder's path."""
    folder = FileSystems.join(output, TEMP_DIR_PREFIX + run_id)
    if is_local(folder):  # with the writers' notes folder, which they never make themselves
        os.makedirs(FileSystems.join(folder, NOTES_DIR), exist_ok=True)
    marker = {"run_id": run_id, "tool": "tfrecord-etl"}
    path = FileSystems.join(folder, RUN_MARKER)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(json.dumps(marker).encode("utf-8"))
    return folder


def holds_our_marker(output: str, folder: str) -> bool:
    """Whether the folder's run marker is the one `start_temp_folder` writes for its run id
    (a file of that name alone proves nothing: the folder may be a user's own)."""
    path = FileSystems.join(output, folder, RUN_MARKER)
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            marker = json.loads(f.read(4096))
    except (OSError, ValueError):
        return False
    expected = {"run_id": folder.removeprefix(TEMP_DIR_PREFIX), "tool": "tfrecord-etl"}
    return marker == expected


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


def remove_empty_folders(path: str) -> None:
    """Removes `path` and the folders below it that hold no file (local disk; elsewhere a
    folder is only a name prefix, gone with its last object)."""
    if not is_local(path) or not os.path.isdir(path):
        return
    for folder, _, _ in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):  # not empty: another task's files are there
            os.rmdir(folder)


class RunAbandoned(RuntimeError):
    """A task of a run whose launcher is gone (interrupted): it writes nothing more."""


def stop_if_abandoned(marker: str | None, temp_dir: str, written: list[str | None]) -> None:
    """Stops a task of a run that was interrupted (its run `marker` is gone with its temporary
    folder), and deletes what it wrote: a cluster may go on running tasks after the launcher
    ended, and they would leave files in the output that no run owns."""
    if marker is None or FileSystems.exists(marker):
        return
    paths = [p for p in written if p and FileSystems.exists(p)]
    if paths:
        FileSystems.delete(paths)
    remove_empty_folders(temp_dir)
    raise RunAbandoned(f"{temp_dir}: the run was interrupted; this task stopped")


def write_atomically(path: str, data: bytes, temp_dir: str) -> None:
    """Writes a file in the run's temporary folder, then renames it to `path` (a leftover of
    a failed write is in that folder, which is ours to remove)."""
    temp = FileSystems.join(temp_dir, "publish-" + path.rstrip("/").rsplit("/", 1)[-1])
    with FileSystems.create(temp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    if not is_local(path):
        FileSystems.rename([temp], [path])  # a copy onto the object, then the temp deleted
    else:
        os.replace(temp, path)  # atomic, also over an existing manifest
