"""A run that stops making progress ends with an error naming what it waited for, instead of
waiting forever (a Dask scheduler whose tasks never start, a worker that hangs).

Progress is what the launcher sees of the run (`sink.progress`): a task's note written or
changed, a unit of the shuffle done, a publishing step begun. When none of it moves for
`--stall_seconds`, `stall_message` names the stage and the tasks it waits for, and the launcher
stops the run as a signal would (`job.interrupt.stop_main`): its tasks are told to stop and its
finished work is kept for a rerun.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from beam_jobs.core.units import count_of
from beam_jobs.sink.progress import ProgressReporter, format_duration

__all__ = ["Expected", "stall_message"]

_SHOWN = 3  # tasks named in the message, at most


@dataclasses.dataclass(frozen=True)
class Expected:
    """What a run's notes will name: its write tasks, and its shuffle units (without their
    folder), in plan order."""

    tasks: tuple[str, ...]
    units: tuple[str, ...] = ()


def stall_message(reporter: ProgressReporter, expected: Expected, limit: float) -> str:
    """Where a run stands when its progress stood still for `limit` seconds: the stage, how far
    it got, and the tasks it waits for (running where, or not started)."""
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
    """The first tasks waited for, each running on a worker (since its last note) or not
    started."""
    shown = []
    for name in names[:_SHOWN]:
        note = notes.get(name)
        shown.append(
            f"{name} (running on {note.get('worker')})" if note else f"{name} (not started)"
        )
    more = f" and {len(names) - _SHOWN:,} more" if len(names) > _SHOWN else ""
    return ", ".join(shown) + more
