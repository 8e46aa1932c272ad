"""The reader's and the contract's one error type."""

from __future__ import annotations

__all__ = ["ManifestError"]


class ManifestError(ValueError):
    """A manifest (or a schema file in the same format) is missing, malformed or inconsistent."""
