"""How shards are stored: the `Compression` of the contract (`tfdata_reader.manifest`), and the
GZIP levels a conversion may write."""

from __future__ import annotations

from tfdata_reader.manifest import Compression

__all__ = ["DEFAULT_GZIP_LEVEL", "GZIP_LEVELS", "Compression"]

GZIP_LEVELS = range(1, 10)
DEFAULT_GZIP_LEVEL = 1  # ISA-L's fastest; see beam_jobs.codec.deflate
