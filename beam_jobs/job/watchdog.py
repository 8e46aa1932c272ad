"""A run that stops making progress ends with an error naming what it waited for, instead of
waiting forever (a Dask scheduler whose tasks never start, a worker that hangs), and a run
whose dataset is published ends even when its runner never says so (a Dask client that lost
its futures).

Progress is what the launcher sees of the run (`sink.progress`): a task's note written or
changed, a unit of the shuffle done, a publishing step begun. When none of it moves for
`--stall_seconds`, `stall_message` names the stage and the tasks it waits for, and the launcher
stops the run as a signal would (`job.interrupt.stop_main`): its tasks are told to stop and its
finished work is kept for a rerun. Publishing removes the work folder and releases the run's
lease last: once both are gone and the output's manifest is this conversion's, made since the
run began, the run is over whatever its runner says (`Watchdog`, after `PUBLISHED_GRACE`).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from beam_jobs.core.units import count_of
from beam_jobs.publish.lease import read_lease
from beam_jobs.publish.output_dir import load_manifest
from beam_jobs.sink.progress import ProgressReporter, format_duration
from beam_jobs.sink.temp_folder import read_marker

__all__ = ["CHECK_SECONDS", "PUBLISHED_GRACE", "Expected", "Watchdog", "stall_message"]

# Seconds a runner may take to say a published run is over before the launcher stops waiting.
PUBLISHED_GRACE = 30.0
CHECK_SECONDS = 5.0  # between checks, at most (a quarter of the stall limit when that is less)

_SHOWN = 3  # tasks named in the message, at most


@dataclasses.dataclass(frozen=True)
class Expected:
    """What a run's notes will name: its write tasks, and its shuffle units (without their
    folder), in plan order."""

    tasks: tuple[str, ...]
    units: tuple[str, ...] = ()


def stall_message(reporter: ProgressReporter, expected: Expected, limit: float) -> str:
    """Where a run stands when its progress stood still for `limit` seconds: the stage, how far
    it got, and the tasks it waits for (running where, or with no note yet)."""
    quiet = format_duration(time.monotonic() - reporter.last_change)
    head = f"no progress for {quiet} (--stall_seconds {limit:g})"
    notes = reporter.notes()
    done = [name for name in expected.tasks if notes.get(name, {}).get("done")]
    if len(done) < len(expected.tasks):
        waiting = [name for name in expected.tasks if not notes.get(name, {}).get("done")]
        if not notes:
            return (
                f"{head}: no write task has started ({count_of(len(expected.tasks), 'task')} "
                "planned): the runner has no worker free for them, or its workers cannot start"
            )
        return (
            f"{head} in stage WriteShards (the write tasks): {len(done)} of "
            f"{len(expected.tasks)} done; waiting for {_waiting(waiting, notes)}"
        )
    units = reporter.units_done()
    if expected.units and len(units & set(expected.units)) < len(expected.units):
        waiting = [name for name in expected.units if name not in units]
        return (
            f"{head} in stage Shuffle (the second pass): {len(units)} of "
            f"{len(expected.units)} units done; waiting for {_waiting(waiting, {})}"
        )
    step = reporter.stages.get("publish")
    if step is None:
        return (
            f"{head}: every task is done; waiting for stage Publish to start (the runner "
            "gathers the shards for it)"
        )
    return f"{head} in stage Publish, at: {step.get('step')} (on {step.get('worker')})"


def _waiting(names: Sequence[str], notes: dict[str, dict[str, Any]]) -> str:
    """The first tasks waited for, each running on a worker (its last note says which) or
    with no note yet (not started, or started less than a note's interval ago)."""
    shown = []
    for name in names[:_SHOWN]:
        note = notes.get(name)
        if not note:
            shown.append(f"{name} (no note yet)")
            continue
        worker = str(note.get("worker"))
        gone = ", a process that has ended" if _ended_here(worker) else ""
        shown.append(f"{name} (running on {worker}{gone})")
    more = f" and {len(names) - _SHOWN:,} more" if len(names) > _SHOWN else ""
    return ", ".join(shown) + more


def _ended_here(worker: str) -> bool:
    """Whether a worker named `host:pid` ran on this machine and its process has ended (a
    worker process killed: the local runner waits for it forever)."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, and another user's
        return False
    return False


class Watchdog:
    """Watches a run from its own thread until `stop()`: calls `on_stall(message)` once when
    its progress stood still for `limit` seconds, or `on_published()` once when its dataset was
    published `PUBLISHED_GRACE` seconds ago and the runner still has not returned.

    Args:
      reporter: the run's progress (its notes, and when they last changed).
      expected: what the notes will name.
      limit: `--stall_seconds`.
      folder: the run's work folder; output, run_id: the output and the run's lease holder.
      files: the run's input files as its manifest records them (`inputs.files`).
    """

    def __init__(
        self,
        reporter: ProgressReporter,
        expected: Expected,
        limit: float,
        where: tuple[str, str, str],
        files: list[dict[str, Any]],
        on_stall: Callable[[str], None],
        on_published: Callable[[], None],
    ) -> None:
        self._reporter, self._expected, self._limit = reporter, expected, limit
        self._folder, self._output, self._run_id = where
        self._files = files
        self._on_stall, self._on_published = on_stall, on_published
        self._started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self._every = min(CHECK_SECONDS, max(0.05, limit / 4))
        reporter.poll_every(self._every)  # its notes as fresh as the checks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._every + 5)

    def _run(self) -> None:
        published_at = None
        while not self._stop.wait(self._every):
            if published_at is None and self._published():
                published_at = time.monotonic()
            if published_at is not None:
                if time.monotonic() - published_at >= PUBLISHED_GRACE:
                    self._on_published()
                    return
            elif time.monotonic() - self._reporter.last_change > self._limit:
                self._on_stall(stall_message(self._reporter, self._expected, self._limit))
                return

    def _published(self) -> bool:
        """The work folder and the lease gone, and the manifest this conversion's, made since
        the run began: what publishing leaves when it ends."""
        try:
            if read_marker(self._folder) is not None:
                return False
            held, _ = read_lease(self._output)
            if held is not None and held.run_id == self._run_id:
                return False
            manifest = load_manifest(self._output)
        except Exception:  # no manifest, or a store that cannot say now: not yet
            return False
        made = datetime.datetime.fromisoformat(manifest.created)
        return manifest.inputs.get("files") == self._files and made >= self._started
