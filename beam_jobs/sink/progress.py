"""Progress of a running conversion, seen from the launcher on any runner.

Each write task leaves a small JSON note (records, bytes, input bytes, whether it is done, and
which worker process wrote it: host and pid) in the run's temporary folder: every few seconds
while it writes (`RunningNote`), and once more when its shard is complete. The launcher polls
that folder through Beam `FileSystems` (local or gs://) and reports tasks done of total, the
share of the input read, an ETA at the rate so far, records and input MB/s: as log lines, or
on an interactive terminal as a live bar (tqdm). Beam counters carry the same numbers, but a
local runner only reports them at the end.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.sink.run_files import create_run_file

__all__ = [
    "NOTE_SECONDS",
    "ProgressReporter",
    "RunningNote",
    "format_duration",
    "note_path",
    "write_note",
]

_log = logging.getLogger(__name__)
NOTES_DIR = "progress"
SHUFFLE_NOTES = "shuffle"  # the second pass's notes, in a folder of their own
NOTE_SECONDS = 5.0  # a running task's note is rewritten at most this often


def note_path(temp_dir: str, shard_name: str) -> str:
    return FileSystems.join(temp_dir, NOTES_DIR, f"{shard_name}.json")


def write_note(
    temp_dir: str,
    shard_name: str,
    records: int,
    num_bytes: int,
    input_bytes: int,
    done: bool = True,
) -> None:
    """Records how far a task is (`done`: its shard is complete; rewritten identically when
    a bundle is retried)."""
    note = {
        "records": records,
        "bytes": num_bytes,
        "input_bytes": input_bytes,
        "done": done,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }
    path = note_path(temp_dir, shard_name)
    with create_run_file(path) as f:
        f.write(json.dumps(note).encode("utf-8"))


class RunningNote:
    """A write task's note while it runs, rewritten at most every `every` seconds (a task of
    a few seconds writes none)."""

    def __init__(self, temp_dir: str, name: str, every: float | None = None) -> None:
        self._temp_dir, self._name = temp_dir, name
        self._every = NOTE_SECONDS if every is None else every
        self._due = time.monotonic() + self._every

    def update(self, records: int, num_bytes: int, input_bytes: int) -> None:
        if time.monotonic() < self._due:
            return
        self._due = time.monotonic() + self._every
        # The launcher removes the run's folder when the run is interrupted (a note never
        # makes it again): the task's next check of its run marker stops it.
        with contextlib.suppress(FileNotFoundError):
            write_note(self._temp_dir, self._name, records, num_bytes, input_bytes, done=False)


def format_duration(seconds: float) -> str:
    """`42 s`, `7 min 05 s`, `3 h 02 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class ProgressReporter:
    """Reports progress every `interval` seconds from a daemon thread until `stop()`: a log
    line when something changed, or with `live` a progress bar that stays on one line."""

    def __init__(
        self,
        temp_dir: str,
        num_shards: int,
        interval: float = 5.0,
        unit: str = "shards",
        input_bytes: int = 0,
        live: bool = False,
        shuffle_units: int = 0,
    ) -> None:
        """`interval`: seconds between polls of the notes; `unit`: what a note stands for
        (with splits, a write task writes a part of several shards); `input_bytes`: the
        whole input's (0: unknown, no share or ETA); `live`: a bar on stderr (a terminal);
        `shuffle_units`: a shuffled conversion's units of its second pass (0: none)."""
        self._unit = unit
        self._pattern = FileSystems.join(temp_dir, NOTES_DIR, "*.json")
        self._shuffle_pattern = FileSystems.join(temp_dir, NOTES_DIR, SHUFFLE_NOTES, "*.json")
        self._shuffle_units = shuffle_units
        self._shuffled = 0
        self._num_shards = num_shards
        self._interval = interval
        self._input_bytes = input_bytes
        self._live = live
        self._bar: Any = None
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
        if self._live and self.poll():
            self._show()  # the bar ends where the run did
        if self._bar is not None:
            self._bar.close()

    def poll(self) -> str | None:
        """Reads new and changed notes (a running task's); returns a progress line when
        something changed."""
        try:
            found = FileSystems.match([self._pattern])[0].metadata_list
        except Exception:
            return None
        changed = self._poll_shuffle()
        for path in (m.path for m in found):
            before = self._seen.get(path)
            if before is not None and before.get("done", True):
                continue  # a finished task's note does not change
            try:
                with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                    note = json.loads(f.read())
            except (OSError, ValueError):
                continue  # still being written: read it next time
            if note != before:
                self._seen[path], changed = note, True
        return self.describe() if changed else None

    def _poll_shuffle(self) -> bool:
        """Counts the second pass's units done (a note each); True when the count moved."""
        if not self._shuffle_units:
            return False
        try:
            done = len(FileSystems.match([self._shuffle_pattern])[0].metadata_list)
        except Exception:
            return False
        moved, self._shuffled = done != self._shuffled, done
        return moved

    def fraction(self) -> float | None:
        """The share of the input read (None: the input's size is not known)."""
        if not self._input_bytes:
            return None
        read = sum(n["input_bytes"] for n in self._seen.values())
        return min(1.0, read / self._input_bytes)

    def describe(self) -> str:
        done, records, input_mb, seconds, workers = self._totals()
        share = ""
        fraction = self.fraction()
        if fraction is not None:
            share = f" ({fraction:.0%} of {self._input_bytes / 1e6:,.1f} MB of input"
            if 0 < fraction < 1:
                share += f", about {format_duration(seconds * (1 - fraction) / fraction)} left"
            share += ")"
        shuffled = ""
        if self._shuffle_units and done == self._num_shards:
            shuffled = f"; shuffled into shards: {self._shuffled}/{self._shuffle_units} units"
        return (
            f"progress: {done}/{self._num_shards} {self._unit}{share}, {records:,} records, "
            f"{input_mb:,.1f} MB of input at {input_mb / seconds:.1f} MB/s, "
            f"from {workers} worker process{'' if workers == 1 else 'es'}{shuffled}"
        )

    def _totals(self) -> tuple[int, int, float, float, int]:
        """Tasks done, records, input MB read, seconds so far, worker processes seen."""
        notes = self._seen.values()
        return (
            sum(1 for n in notes if n.get("done", True)),
            sum(n["records"] for n in notes),
            sum(n["input_bytes"] for n in notes) / 1e6,
            max(time.monotonic() - self._started, 1e-9),
            len({n.get("worker") for n in notes}),
        )

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            line = self.poll()
            if line and self._live:
                self._show()
            elif line:
                _log.info("%s", line)

    def _show(self) -> None:
        """The bar: the input's share read (tqdm adds the time taken and left), then tasks
        done, records and input MB/s."""
        from tqdm import tqdm

        if self._bar is None:
            shape = "{l_bar}{bar}| {elapsed}<{remaining}{postfix}"  # postfix: ", ..."
            self._bar = tqdm(total=100, file=sys.stderr, dynamic_ncols=True, bar_format=shape)
        done, records, input_mb, seconds, _ = self._totals()
        fraction = self.fraction()
        if fraction is not None:
            self._bar.n = round(100 * fraction, 1)
        self._bar.set_postfix_str(
            f"{done}/{self._num_shards} {self._unit}, {records:,} records, "
            f"{input_mb / seconds:.1f} MB/s",
            refresh=False,
        )
        self._bar.refresh()
