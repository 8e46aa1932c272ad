"""What planning tells the user about the types it chose, one line per kind of decision.

Every decision that changes how a column is stored (numbers kept as text, codes with leading
zeros, markers read as missing) is named, for every column it touches: a wide file gets one
line per kind that lists its columns, not dozens of lines, nor only the first five. Ordinary
float32 rounding of decimals (what TensorFlow users expect of a float feature) is an info
line, not a warning.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable

__all__ = ["TypeNote", "log_notes", "notes_text"]

_EXAMPLES_SHOWN = 8  # columns whose examples a line shows; every column is named


@dataclasses.dataclass(frozen=True)
class TypeNote:
    """One column's part in a kind of type decision.

    Attributes:
      kind: the decision and what to do about it, the same text for every column of the kind.
      column: the column.
      detail: what was seen in it (a few example values, counts); may be empty.
      warning: whether the decision changes values' identity (else an info line).
    """

    kind: str
    column: str
    detail: str = ""
    warning: bool = True


def notes_text(notes: Iterable[TypeNote]) -> list[tuple[bool, str]]:
    """(is a warning, line) per kind, in the order kinds first appear."""
    groups: dict[tuple[str, bool], list[TypeNote]] = {}
    for note in notes:
        groups.setdefault((note.kind, note.warning), []).append(note)
    lines = []
    for (kind, warning), members in groups.items():
        named = [
            f"{n.column!r} ({n.detail})" if n.detail and i < _EXAMPLES_SHOWN else repr(n.column)
            for i, n in enumerate(members)
        ]
        what = "column" if len(members) == 1 else f"{len(members)} columns"
        lines.append((warning, f"{what} {', '.join(named)}: {kind}"))
    return lines


def log_notes(notes: Iterable[TypeNote], log: logging.Logger) -> None:
    """Logs `notes_text`: warnings as warnings, the others as info."""
    for warning, line in notes_text(notes):
        (log.warning if warning else log.info)("%s", line)
