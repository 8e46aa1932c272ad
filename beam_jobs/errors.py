"""The error every input problem raises: its message names the file and where in it."""

from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """Input that cannot be read or converted (exit code 1): names the file and the bytes."""
