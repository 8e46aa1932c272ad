"""Files of a run's temporary folder (`.tfrecord-etl-tmp-<run id>/`), created so that a writer
still running after its run was stopped cannot bring the removed folder back."""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.paths import is_local

__all__ = ["TEMP_DIR_PREFIX", "create_run_file", "make_run_folder", "write_at_once"]

TEMP_DIR_PREFIX = ".tfrecord-etl-tmp-"  # + a run id; where shards are written before publishing


def create_run_file(path: str) -> BinaryIO:
    """Opens a new file below a run's temporary folder for writing.

    On local disk the folders between the temporary folder and the file are made one at a
    time and the temporary folder itself never: Beam's `FileSystems.create` makes every
    missing parent, so a local writer thread or worker process that outlives an interrupted
    run would make the folder the launcher just removed again. Here it fails instead
    (FileNotFoundError). Elsewhere (GCS) a folder is only a name prefix."""
    if not is_local(path):
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
    folder, name = os.path.split(os.path.abspath(path))
    parts = folder.split(os.sep)
    roots = [i for i, part in enumerate(parts) if part.startswith(TEMP_DIR_PREFIX)]
    # Below the temporary folder only (a file outside one goes into an existing folder).
    for depth in range(roots[-1] + 2 if roots else len(parts) + 1, len(parts) + 1):
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.sep.join(parts[:depth]))
    return open(os.path.join(folder, name), "wb")


def make_run_folder(temp_dir: str) -> None:
    """Makes a temporary folder that no launcher made (`WriteShards`, `ConvertToShards`
    inside a user's pipeline): its writers' `create_run_file` never does."""
    if is_local(temp_dir):
        os.makedirs(temp_dir, exist_ok=True)


def write_at_once(path: str, data: bytes) -> None:
    """Writes a file below a run's temporary folder so that no reader sees half of it: on
    local disk under another name, then renamed; an object store's object is whole or none."""
    if not is_local(path):
        with create_run_file(path) as f:
            f.write(data)
        return
    partial = path + ".partial"
    with create_run_file(partial) as f:
        f.write(data)
    os.replace(partial, path)
