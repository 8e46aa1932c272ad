"""Every error tfrecord-etl raises on purpose, and how one crosses from a worker to the launcher.

Each type maps to one exit code of the CLI: `UsageError` 2 (a flag or an input pattern is
wrong), `DataError` and its kinds 1 (the input or a dataset is bad; the message names the file
and where in it), `OutputBusy` 4 (another run writes the output folder), `Stalled` and anything
else 3. `ManifestError` lives with the manifest in `tfdata_reader` (the reader must not import
Beam) and is re-exported here.

Runners that run DoFns in other threads or processes hand the launcher only the text of a
worker's traceback, not the exception object. So a worker raises our errors inside
`raised_for_launcher()`, which appends one marker line (`TFRECORD_ETL_ERROR[...]`, the type, the
message and the details as base64 JSON), and the launcher's `recover()` rebuilds the typed error
from whichever form it gets. Nothing else parses a runner's exception text.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from tfdata_reader.manifest import ManifestError

__all__ = [
    "DataError",
    "FramingError",
    "ManifestError",
    "OutputBusy",
    "Stalled",
    "TooManyBadRecords",
    "ToolError",
    "UsageError",
    "raised_for_launcher",
    "recover",
]


class ToolError(Exception):
    """Base of the errors a worker can hand to the launcher; `details` must be JSON values.

    The details are the exception's second argument, so that Beam, which re-raises a DoFn's
    error as `type(e)(message + where, *e.args[1:])`, keeps them (and the type).
    """

    def __init__(self, message: str, details: dict[str, Any] | None = None, **more: Any) -> None:
        self.details = {**(details or {}), **more}
        super().__init__(message, self.details)

    def __str__(self) -> str:
        return self.message

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class UsageError(ToolError, ValueError):
    """A flag has a bad value, or an input pattern matches nothing (exit code 2); the message
    says which flag, the value, and what is accepted."""


class DataError(ToolError, ValueError):
    """Input that cannot be read or converted (exit code 1); the message names the file and the
    bytes or line."""


class TooManyBadRecords(DataError):
    """More rows than `--max_bad_fraction` allows could not be converted; `output` is the output
    folder, `dead_letters` the files (relative to it) that list them."""

    @property
    def output(self) -> str:
        return self.details.get("output", "")

    @property
    def dead_letters(self) -> list[str]:
        return self.details.get("dead_letters", [])


class OutputBusy(ToolError):
    """Another conversion holds the output folder's lease (exit code 4: try again later)."""


class Stalled(ToolError):
    """The run's progress stood still past `--stall_seconds` (exit code 3); the message names
    the stage and what it waited for."""


class FramingError(ValueError):
    """A TFRecord stream is cut short or a record's checksum does not match."""


_MARKER = "TFRECORD_ETL_ERROR"
_MARKER_RE = re.compile(_MARKER + r"\[([A-Za-z0-9+/=]+)\]")
_RUNNING_RE = re.compile(r" \[while running '[^']*'\]")  # what Beam appends to a DoFn's error


def _kinds() -> dict[str, type[ToolError]]:
    found, todo = {}, [ToolError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def _marker(error: ToolError) -> str:
    payload = {"type": type(error).__name__, "message": error.message, "details": error.details}
    encoded = base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
    return f"{_MARKER}[{encoded}]"


@contextlib.contextmanager
def raised_for_launcher() -> Iterator[None]:
    """Wraps worker code: a `ToolError` raised inside leaves with its marker line appended, so
    that `recover()` can rebuild it from the text any runner reports."""
    try:
        yield
    except ToolError as e:
        if _MARKER in e.message:
            raise
        raise type(e)(f"{e.message}\n{_marker(e)}", **e.details) from e


def recover(error: BaseException) -> ToolError | None:
    """The typed error behind what a runner raised (None when it was not ours).

    Looks for the marker in the error's text and in its causes (the last marker found wins:
    runners repeat a traceback's text, but it is one error), and else for one of our error
    types among the exception and its causes.
    """
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    for exc in seen:
        found = _MARKER_RE.findall(str(exc))
        if found:
            payload = json.loads(base64.b64decode(found[-1]))
            cls = _kinds().get(payload["type"], DataError)
            return cls(payload["message"], **payload.get("details", {}))
    for exc in seen:
        if isinstance(exc, ToolError):
            message = _RUNNING_RE.sub("", _MARKER_RE.sub("", exc.message)).rstrip()
            return type(exc)(message, **exc.details)
    return None
