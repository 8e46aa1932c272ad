"""How shards are stored: uncompressed or GZIP, and the GZIP levels there are."""

from __future__ import annotations

import enum

__all__ = ["DEFAULT_GZIP_LEVEL", "GZIP_LEVELS", "Compression"]


class Compression(str, enum.Enum):
    """A shard's compression, as the manifest records it (`"none"`, `"gzip"`)."""

    NONE = "none"
    GZIP = "gzip"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> Compression:
        """`none` or `gzip`; ValueError naming the choices."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(c.value for c in cls)
            raise ValueError(f"must be one of {choices}, got {text!r}") from None


GZIP_LEVELS = range(1, 10)
DEFAULT_GZIP_LEVEL = 1  # ISA-L's fastest; see beam_jobs.codec.deflate
