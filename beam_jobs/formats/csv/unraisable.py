"""Silences one known, handled message: pyarrow decodes a malformed row's text as UTF-8 before
calling the invalid-row handler, and when the row is not UTF-8 the decoding error is printed
as "Exception ignored in ..." with a traceback. The readers then handle that row themselves
(`ranges._UndecodableRow`), so the message is noise; every other unraisable goes on to the
previous hook.
"""

from __future__ import annotations

import sys

__all__ = ["HANDLER_NAMES", "install"]

# The invalid-row handlers our CSV readers give pyarrow.
HANDLER_NAMES = frozenset({"_on_malformed", "_skip_malformed"})


def install() -> None:
    """Installs the filter once per process (idempotent)."""
    if getattr(sys.unraisablehook, "_tfrecord_etl", False):
        return
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        handler = getattr(unraisable.object, "__name__", "")
        if isinstance(unraisable.exc_value, UnicodeDecodeError) and handler in HANDLER_NAMES:
            return
        previous(unraisable)

    hook._tfrecord_etl = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
