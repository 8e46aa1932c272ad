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

from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.tasks import WriteTask
from beam_jobs.sink.run_files import create_run_file
from tfdata_reader.manifest import shard_name

__all__ = [
    "NOTE_SECONDS",
    "SHUFFLE_RUNNING",
    "ProgressReporter",
    "RunningNote",
    "format_duration",
    "note_path",
    "task_note_name",
    "unit_note_name",
    "unit_running_name",
    "write_note",
    "write_stage_note",
]

_log = logging.getLogger(__name__)
NOTES_DIR = "progress"
SHUFFLE_NOTES = "shuffle"  # the second pass's notes, in a folder of their own
SHUFFLE_RUNNING = f"{SHUFFLE_NOTES}/running"  # the notes of its units at work
STAGE_NOTES = "stages"  # what a one-worker stage (publishing) is doing, a note a stage
NOTE_SECONDS = 5.0  # a running task's note is rewritten at most this often


def note_path(temp_dir: str, shard_name: str) -> str:
    return FileSystems.join(temp_dir, NOTES_DIR, f"{shard_name}.json")


def task_note_name(task: WriteTask, sharding: ShardingOptions) -> str:
    """The name a write task's notes (and errors) give it: its shard's, or when it writes
    parts of shards (splits, many files) its own."""
    if task.whole_shard:
        part = task.parts[0]
        prefix = part.split or sharding.shard_prefix
        return shard_name(prefix, part.index, part.num_shards, sharding.compression)
    return f"task-{task.index:05d}-of-{task.num_tasks:05d}"


def unit_note_name(shard: str, part: int) -> str:
    """The note of the shuffle's unit that writes part `part` of shard `shard`."""
    return f"{SHUFFLE_NOTES}/{shard}.part{part}"


def unit_running_name(shard: str, part: int) -> str:
    """The note a unit of the shuffle rewrites while it works (a folder of its own: a note in
    `SHUFFLE_NOTES` says the unit is done)."""
    return f"{SHUFFLE_RUNNING}/{shard}.part{part}"


def write_note(
    temp_dir: str,
    shard_name: str,
    records: int,
    num_bytes: int,
    input_bytes: int,
    done: bool = True,
    reused: bool = False,
) -> None:
    """Records how far a task is (`done`: its shard is complete; `reused`: a failed run's
    finished work, checked and taken as it is; rewritten identically when a bundle is
    retried)."""
    note = {
        "records": records,
        "bytes": num_bytes,
        "input_bytes": input_bytes,
        "done": done,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }
    if reused:
        note["reused"] = True
    path = note_path(temp_dir, shard_name)
    with create_run_file(path) as f:
        f.write(json.dumps(note).encode("utf-8"))


def write_stage_note(temp_dir: str, stage: str, step: str) -> None:
    """Says which step a one-worker stage is at (publishing: merging statistics, naming
    shards), for the launcher's progress and its stall check. A run without a launcher (no
    notes folder) writes none."""
    note = {"step": step, "worker": f"{socket.gethostname()}:{os.getpid()}"}
    path = FileSystems.join(temp_dir, NOTES_DIR, STAGE_NOTES, f"{stage}.json")
    with contextlib.suppress(FileNotFoundError), create_run_file(path) as f:
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
        # A run's folder may be gone (a rerun of another conversion removed it; a note never
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
        self._stage_pattern = FileSystems.join(temp_dir, NOTES_DIR, STAGE_NOTES, "*.json")
        self._shuffle_units = shuffle_units
        self._shuffled: set[str] = set()  # the second pass's units done, by note name
        self._running_pattern = FileSystems.join(temp_dir, NOTES_DIR, SHUFFLE_RUNNING, "*.json")
        self._at_work: set[tuple[str, int, float]] = set()  # units' running notes, as listed
        self.stages: dict[str, dict[str, Any]] = {}  # one-worker stages' notes, by stage
        self.last_change = time.monotonic()  # when a note last changed (the stall check's)
        self._num_shards = num_shards
        self._interval = interval
        self._poll = interval  # seconds between polls (`poll_every`)
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
        changed = self._poll_shuffle() | self._poll_stages()
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
        if changed:
            self.last_change = time.monotonic()
        return self.describe() if changed else None

    def _poll_shuffle(self) -> bool:
        """Notes the second pass's units done (a note each); True when one more is."""
        if not self._shuffle_units:
            return False
        try:
            found = FileSystems.match([self._shuffle_pattern])[0].metadata_list
        except Exception:
            return False
        done = {m.path.rsplit("/", 1)[-1].removesuffix(".json") for m in found}
        moved, self._shuffled = done != self._shuffled, done
        try:  # units at work: a note rewritten is progress too
            running = FileSystems.match([self._running_pattern])[0].metadata_list
        except Exception:
            running = []
        at_work = {(m.path, m.size_in_bytes, m.last_updated_in_seconds) for m in running}
        moved, self._at_work = moved or at_work != self._at_work, at_work
        return moved

    def _poll_stages(self) -> bool:
        """Reads the one-worker stages' notes (publishing); True when one changed."""
        try:
            found = FileSystems.match([self._stage_pattern])[0].metadata_list
        except Exception:
            return False
        changed = False
        for path in (m.path for m in found):
            try:
                with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                    note = json.loads(f.read())
            except (OSError, ValueError):
                continue
            stage = path.rsplit("/", 1)[-1].removesuffix(".json")
            if self.stages.get(stage) != note:
                self.stages[stage], changed = note, True
        return changed

    def notes(self) -> dict[str, dict[str, Any]]:
        """The write tasks' notes seen, by note name."""
        return {p.rsplit("/", 1)[-1].removesuffix(".json"): n for p, n in self._seen.items()}

    def units_done(self) -> set[str]:
        """The names (`unit_note_name` without its folder) of the second pass's units done."""
        return set(self._shuffled)

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
        # A rerun's reused tasks took no time: the time left is at this run's own rate.
        own = sum(n["input_bytes"] for n in self._seen.values() if not n.get("reused"))
        if fraction is not None:
            share = f" ({fraction:.0%} of {self._input_bytes / 1e6:,.1f} MB of input"
            if 0 < fraction < 1 and own:
                left = seconds * self._input_bytes * (1 - fraction) / own
                share += f", about {format_duration(left)} left"
            share += ")"
        shuffled = ""
        if self._shuffle_units and done == self._num_shards:
            units = len(self._shuffled)
            shuffled = f"; shuffled into shards: {units}/{self._shuffle_units} units"
        reused = sum(1 for n in self._seen.values() if n.get("reused"))
        kept = f" ({reused} reused)" if reused else ""
        return (
            f"progress: {done}/{self._num_shards} {self._unit}{kept}{share}, {records:,} records, "
            f"{input_mb:,.1f} MB of input at {own / 1e6 / seconds:.1f} MB/s, "
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

    def poll_every(self, seconds: float) -> ProgressReporter:
        """Polls the notes this often (the stall check's `last_change` is as fresh), still
        reporting at most every `interval` seconds."""
        self._poll = min(self._interval, seconds)
        return self

    def _run(self) -> None:
        shown = time.monotonic()
        changed = False
        while not self._stop.wait(self._poll):
            changed = bool(self.poll()) or changed
            if not changed or time.monotonic() - shown < self._interval - 1e-3:
                continue
            shown, changed = time.monotonic(), False
            if self._live:
                self._show()
            else:
                _log.info("%s", self.describe())

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
