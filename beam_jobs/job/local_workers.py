"""The local runner's worker processes start in a session of their own, so that a terminal's
Ctrl-C, which goes to the whole foreground process group, reaches only the launcher.

Without this, each of Beam's worker processes (`--direct_running_mode=multi_processing`, the
default above 1 GiB of input) receives the SIGINT too and prints a KeyboardInterrupt traceback,
some of them also "terminate called without an active exception", dozens of lines around the
launcher's one-line message. The launcher stops them itself: a worker whose launcher is gone
loses its control channel and exits (checked here: none is left a few seconds after the
launcher ends).

Beam starts the workers with `subprocess.Popen` in `local_job_service.SubprocessSdkWorker.run`
and offers no option for it, so `apply()` gives that module a `subprocess` whose `Popen` starts
a new session. Nothing else changes; if a Beam version no longer starts workers that way, it
does nothing (the tracebacks come back, nothing breaks). `apply()` also bounds how long a
pipeline's end waits for a worker process to exit (`STOP_SECONDS`, then the workers are ended):
Beam 2.77 sometimes never lets one go after a failed bundle.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import types
import weakref

from beam_jobs.job import interrupt

__all__ = ["apply", "is_quiet", "quiet", "stop_all"]


_started: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()


_quiet = False  # `quiet`: the workers' own output is not shown


def is_quiet() -> bool:
    """Whether worker processes' own output is dropped (`quiet`)."""
    return _quiet


def quiet(on: bool = True) -> None:
    """Leaves out what worker processes print themselves (the command line does so without
    --verbose): a failing step's traceback, which the launcher reports in one line, printed
    again by every worker, some 90 lines, and their start-up notices."""
    global _quiet
    _quiet = on


class _NewSessionPopen(subprocess.Popen[bytes]):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("start_new_session", True)
        if _quiet:
            kwargs["stdout"] = kwargs["stderr"] = subprocess.DEVNULL
        super().__init__(*args, **kwargs)
        _started.add(self)


def stop_all() -> None:
    """Kills the worker processes started so far, with their shell (each is its own session).

    For an interrupted launcher: Beam's runner, unwinding, waits for every worker to end, and
    a worker still starting up never does (measured: a SIGTERM 3-5 s into a multi-process run
    hung the launcher for good)."""
    global _stopping
    _stopping = True
    killed = []
    for process in list(_started):
        if process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
                killed.append(process)
    # Gone before the launcher removes the temporary folder: a worker still writing would
    # otherwise fail on the removed folder with a traceback (a kill is not instant).
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    for process in killed:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(max(0.0, deadline - time.monotonic()))
        while _group_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)


KILL_WAIT_SECONDS = 5.0  # how long `stop_all` waits for the killed workers to be gone


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie left to be reaped does not)."""
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


_stopping = False  # set by `stop_all`: the workers' ends are expected, not errors

# Seconds a pipeline's end waits for a worker process to exit once its work is over, before
# ending it (`_stop_worker_in_time`); a worker exits within a second or two.
STOP_SECONDS = 30.0


def _stop_worker_in_time(handler: object) -> None:
    """Beam's `SubprocessSdkWorkerHandler.stop_worker`, bounded. Beam waits for the worker's
    process to exit, which it does when the runner closes its control stream; after a failed
    bundle, Beam 2.77 sometimes never closes one (seen twice in this suite's worker-process
    error test: the run hung for good). Past STOP_SECONDS the workers are ended: the
    pipeline is over, and its result or error stands."""
    thread = handler.worker_thread  # type: ignore[attr-defined]
    thread.join(STOP_SECONDS)
    if thread.is_alive():
        stop_all()
        thread.join()


def _quiet_when_stopping(previous):
    """A threading.excepthook that drops Beam's "Worker subprocess exited with return code"
    from its worker threads once `stop_all` ended the workers on purpose."""

    def hook(args) -> None:
        if _stopping and args.thread is not None and args.thread.name == "run_worker":
            return
        previous(args)

    return hook


def apply() -> bool:
    """Idempotent; True when the workers Beam starts from now on get their own session."""
    from apache_beam.runners.portability import local_job_service

    used = getattr(local_job_service, "subprocess", None)
    if isinstance(used, types.SimpleNamespace):
        return True  # applied before
    if used is not subprocess:
        return False
    shim = types.SimpleNamespace(
        **{name: getattr(subprocess, name) for name in dir(subprocess) if not name.startswith("_")}
    )
    shim.Popen = _NewSessionPopen
    local_job_service.subprocess = shim  # type: ignore[assignment]
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    worker_handlers.SubprocessSdkWorkerHandler.stop_worker = _stop_worker_in_time  # type: ignore[method-assign,assignment]
    threading.excepthook = _quiet_when_stopping(threading.excepthook)
    interrupt.call_on_signal(stop_all)
    return True
