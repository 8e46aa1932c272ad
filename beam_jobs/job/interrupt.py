"""Ctrl-C and SIGTERM end a conversion cleanly: the signal becomes an `Interrupted` exception in
the main thread, so the usual cleanup runs (the run's tasks told to stop, its finished work
kept for a rerun, the lease released, nothing published), and the process then leaves at once
with 128 + the signal's number. Once publishing has begun, a signal is put off instead
(`deferred_while`): publishing finishes and the run reports success, so a dataset is either
published whole or not at all. The stall watchdog ends a run the same way from its own thread
(`stop_main`).

Leaving at once matters: Beam's runner and TensorFlow keep C++ threads that abort the process
(`terminate called without an active exception`, exit 134) when Python shuts down around them.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator

__all__ = [
    "Interrupted",
    "call_on_signal",
    "deferred",
    "deferred_while",
    "forget_deferred",
    "interruptible",
    "raised",
    "stop_main",
    "stoppable",
]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_STOP = signal.SIGUSR1  # the stall watchdog's, sent to the main thread (`stop_main`)
_log = logging.getLogger(__name__)


class Interrupted(BaseException):
    """The run was asked to stop by a signal (a BaseException, like KeyboardInterrupt, so that
    `except Exception` handlers do not swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_ON_SIGNAL: list[Callable[[], None]] = []


def call_on_signal(callback: Callable[[], None]) -> None:
    """Has `callback` called when a signal interrupts the run, before the exception is raised:
    for what must stop first so that the unwinding can end (worker processes)."""
    if callback not in _ON_SIGNAL:
        _ON_SIGNAL.append(callback)


_GUARDS: list[Callable[[], bool]] = []  # `deferred_while`'s, innermost last
_DEFERRED: list[int] = []  # the signals put off
_PENDING: list[BaseException] = []  # what `stop_main` raises in the main thread
_RAISED: list[int] = []  # the signals that raised `Interrupted`


def _raise(signum: int, frame: object) -> None:
    if _GUARDS and _GUARDS[-1]():
        name = signal.Signals(signum).name
        if not _DEFERRED:
            _log.warning("%s: publishing has begun; it finishes first", name)
        _DEFERRED.append(signum)
        return
    for each in _SIGNALS:  # a second signal must not break the cleanup of the first
        signal.signal(each, signal.SIG_IGN)
    for callback in _ON_SIGNAL:
        callback()
    _RAISED.append(signum)
    raise Interrupted(signum)


def raised() -> int | None:
    """The signal that interrupted this process (None: none did). Code the interruption
    passed through may have wrapped it in an error of its own (Python does, raised inside a
    class body's `__set_name__`; so do some C extensions): that error is still this signal's."""
    return _RAISED[0] if _RAISED else None


@contextlib.contextmanager
def deferred_while(guard: Callable[[], bool]) -> Iterator[None]:
    """While the block runs, a SIGINT or SIGTERM for which `guard()` is True (publishing has
    begun, or is over) is put off: noted (`deferred`), not raised."""
    _GUARDS.append(guard)
    try:
        yield
    finally:
        _GUARDS.remove(guard)


def forget_deferred() -> None:
    """A new run: no signal was put off yet (`deferred`)."""
    _DEFERRED.clear()


def deferred() -> int | None:
    """The first signal put off by `deferred_while` (None: none was)."""
    return _DEFERRED[0] if _DEFERRED else None


def _raise_pending(signum: int, frame: object) -> None:
    if not _PENDING:
        return
    for callback in _ON_SIGNAL:
        callback()
    raise _PENDING.pop()


def stop_main(error: BaseException) -> bool:
    """From another thread: raises `error` in the main thread, as a signal would (the worker
    processes stopped first); False when the main thread is not `stoppable`."""
    if signal.getsignal(_STOP) is not _raise_pending:
        return False
    _PENDING.append(error)
    signal.pthread_kill(threading.main_thread().ident or 0, _STOP)
    return True


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """While the block runs (in the main thread), `stop_main` can end it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(_STOP, _raise_pending)
    try:
        yield
    finally:
        signal.signal(_STOP, previous)
        _PENDING.clear()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {each: signal.signal(each, _raise) for each in _SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
