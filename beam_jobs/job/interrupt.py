"""Ctrl-C and SIGTERM end a conversion cleanly: the signal becomes an `Interrupted` exception in
the main thread, so the usual cleanup runs (the temporary folder removed, the lease released,
nothing published), and the process then leaves at once with 128 + the signal's number.

Leaving at once matters: Beam's runner and TensorFlow keep C++ threads that abort the process
(`terminate called without an active exception`, exit 134) when Python shuts down around them.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

__all__ = ["Interrupted", "call_on_signal", "interruptible"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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


def _raise(signum: int, frame: object) -> None:
    for each in _SIGNALS:  # a second signal must not break the cleanup of the first
        signal.signal(each, signal.SIG_IGN)
    for callback in _ON_SIGNAL:
        callback()
    raise Interrupted(signum)


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
