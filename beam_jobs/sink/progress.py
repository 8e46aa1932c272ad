"""Progress of a running conversion, seen from the launcher on any runner.

Each shard writer leaves a small JSON note (records, bytes, input bytes, and which worker
process wrote it: host and pid) in the run's temporary
folder when its shard is complete; the launcher polls that folder through Beam `FileSystems`
(local or gs://) and logs shards done of total, records and input MB/s. Beam counters carry the
same numbers, but a local runner only reports them at the end.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

__all__ = [
    "ProgressReporter",
    "note_path",
    "write_note",
]

_log = logging.getLogger(__name__)
NOTES_DIR = "progress"


def note_path(temp_dir: str, shard_name: str) -> str:
    return FileSystems.join(temp_dir, NOTES_DIR, f"{shard_name}.json")


def write_note(
    temp_dir: str, shard_name: str, records: int, num_bytes: int, input_bytes: int
) -> None:
    """Records that a shard is complete (rewritten identically when a bundle is retried)."""
    note = {
        "records": records,
        "bytes": num_bytes,
        "input_bytes": input_bytes,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }
    path = note_path(temp_dir, shard_name)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(json.dumps(note).encode("utf-8"))


class ProgressReporter:
    """Logs progress every `interval` seconds from a daemon thread until `stop()`."""

    def __init__(
        self, temp_dir: str, num_shards: int, interval: float = 5.0, unit: str = "shards"
    ) -> None:
        """`interval`: seconds between polls of the notes; `unit`: what a note stands for
        (with splits, a write task writes a part of several shards)."""
        self._unit = unit
        self._pattern = FileSystems.join(temp_dir, NOTES_DIR, "*.json")
        self._num_shards = num_shards
        self._interval = interval
        self._seen: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._started = time.monotonic()

    def start(self) -> ProgressReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 5)

    def poll(self) -> str | None:
        """Reads new notes; returns a progress line when something changed."""
        try:
            found = FileSystems.match([self._pattern])[0].metadata_list
        except Exception:
            return None
        new = [m.path for m in found if m.path not in self._seen]
        for path in new:
            try:
                with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                    self._seen[path] = json.loads(f.read())
            except (OSError, ValueError):
                continue  # still being written: read it next time
        if not new:
            return None
        return self.describe()

    def describe(self) -> str:
        records = sum(n["records"] for n in self._seen.values())
        input_mb = sum(n["input_bytes"] for n in self._seen.values()) / 1e6
        seconds = max(time.monotonic() - self._started, 1e-9)
        workers = len({n.get("worker") for n in self._seen.values()})
        return (
            f"progress: {len(self._seen)}/{self._num_shards} {self._unit}, {records:,} records, "
            f"{input_mb:,.1f} MB of input at {input_mb / seconds:.1f} MB/s, "
            f"from {workers} worker process{'' if workers == 1 else 'es'}"
        )

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            line = self.poll()
            if line:
                _log.info("%s", line)
