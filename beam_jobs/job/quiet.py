"""A run without Beam's own error output: its failing step reaches the caller once, as our
error, not as some 200 lines of the runner's logs and the workers' tracebacks.

Beam logs a failing bundle's traceback from several loggers, its in-process workers print
another past logging, and worker processes print theirs. The command line runs this way unless
`--verbose`, and so does `beam_jobs.convert` unless `verbose=True`; the levels and stderr are
restored when the run ends.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from beam_jobs.job import local_workers

__all__ = ["BEAM_ERROR_LOGGERS", "beam_errors_quiet"]

# Beam's loggers that report a failing step (the launcher reports it once, as our error).
BEAM_ERROR_LOGGERS = (
    "apache_beam.runners.common",
    "apache_beam.runners.worker",
    "apache_beam.runners.portability",
    "apache_beam.runners.portability.fn_api_runner",
    "apache_beam.runners.portability.local_job_service",
)


class _TracebackFilter:
    """stderr without the tracebacks Beam's in-process workers print for a failing bundle
    (`sdk_worker` prints them itself, past logging)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._dropped = False

    def write(self, text: str) -> int:
        dropped, self._dropped = self._dropped, text.startswith("Traceback (most recent call")
        if self._dropped or (dropped and text == "\n"):
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def beam_errors_quiet() -> Iterator[None]:
    """Inside the block: Beam's error loggers at CRITICAL, its workers' tracebacks left out
    of stderr, worker processes' own output dropped."""
    loggers = [logging.getLogger(name) for name in BEAM_ERROR_LOGGERS]
    levels = [logger.level for logger in loggers]
    was_quiet = local_workers.is_quiet()
    stderr, sys.stderr = sys.stderr, _TracebackFilter(sys.stderr)
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    local_workers.quiet()
    try:
        yield
    finally:
        sys.stderr = stderr
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        local_workers.quiet(was_quiet)
