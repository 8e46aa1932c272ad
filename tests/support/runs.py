"""Conversions run as processes the way an operator meets them: killed at a point of their work
(SIGKILL of the whole process group), signalled, or hung, then run again."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOOKS = pathlib.Path(__file__).resolve().parent / "hooks"


def convert_argv(source: pathlib.Path, out: pathlib.Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "beam_jobs", "convert", "--input", str(source),
            "--output", str(out), *flags]  # fmt: skip


def hooked_env(**hooks: str) -> dict[str, str]:
    """The environment of a conversion whose processes load the test hooks
    (`support/hooks/sitecustomize.py`) with these variables."""
    path = os.pathsep.join(p for p in (str(HOOKS), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2", **hooks)


def start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """A conversion in a process group of its own (as a scheduler or a terminal starts one)."""
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=env,
    )  # fmt: skip


def kill_when(proc: subprocess.Popen, ready: Callable[[], bool], timeout: float = 120) -> bool:
    """SIGKILLs the process's whole group as soon as `ready()`; False when the run ended first
    (nothing was killed)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            proc.communicate()
            return False
        assert time.monotonic() < deadline, "the run never reached the point"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    return True


def records(out: pathlib.Path, prefix: str = "") -> int:
    """Finished tasks' records (of tasks whose key starts with `prefix`) in the work folders
    of an output."""
    return len(list(out.glob(f".tfrecord-etl-tmp-*/done/{prefix}*.commit")))


def status(completed: subprocess.CompletedProcess | str) -> dict:
    """The JSON status line a conversion ends with."""
    stdout = completed if isinstance(completed, str) else completed.stdout
    return json.loads(stdout.strip().splitlines()[-1])
