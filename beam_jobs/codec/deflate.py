"""DEFLATE for GZIP shards: ISA-L (the `isal` package) for levels 1-3, zlib for 4-9.

Both write standard gzip members that TensorFlow, Python's `gzip` and every gzip reader read.
On our shards (serialized Examples) ISA-L at level 1 compressed at 764 MB/s to 24.8% of the
input where zlib's default level 6 managed 43 MB/s and 22.7% (measured on one 64 MB shard of the
bench input on the development machine; docs/performance.md): one core compressed a shard in
a tenth of a second rather than a second and a half. Without `isal` installed, levels 1-3 use
zlib at that level.
"""

from __future__ import annotations

import zlib
from typing import Any

from beam_jobs.core.compression import DEFAULT_GZIP_LEVEL, GZIP_LEVELS

__all__ = ["compressor", "crc32", "engine", "gzip_bytes"]

_ISAL_LEVELS = range(1, 4)  # ISA-L's levels are 0-3; 0 compresses less than zlib's 1
_GZIP_WBITS = 31  # a gzip header and trailer around the DEFLATE stream


def _isal() -> Any:
    try:
        from isal import isal_zlib
    except ImportError:
        return None
    return isal_zlib


def engine(level: int) -> str:
    """Which library compresses at `level`: "isal" or "zlib"."""
    return "isal" if level in _ISAL_LEVELS and _isal() is not None else "zlib"


def compressor(level: int = DEFAULT_GZIP_LEVEL) -> Any:
    """A compress object writing one gzip member (`compress(data)`, `flush()`)."""
    if level not in GZIP_LEVELS:
        raise ValueError(f"the GZIP level must be 1 to 9, got {level}")
    library = _isal() if engine(level) == "isal" else zlib
    return library.compressobj(level, library.DEFLATED, _GZIP_WBITS)


def gzip_bytes(data: bytes, level: int = DEFAULT_GZIP_LEVEL) -> bytes:
    """`data` as one gzip member, as a shard of that level stores it."""
    c = compressor(level)
    return c.compress(data) + c.flush()


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32 of gzip's trailer, continued from `value` (ISA-L's, else zlib's)."""
    library = _isal() or zlib
    return library.crc32(data, value)
