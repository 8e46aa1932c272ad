"""DEFLATE for GZIP shards: ISA-L (the `isal` package) for levels 1-3, libdeflate (the
`deflate` package) for levels 4-9.

Both write standard gzip members that TensorFlow, Python's `gzip` and every gzip reader read.
On our shards (serialized Examples) ISA-L at level 1 compressed at 764 MB/s to 24.8% of the
input where zlib's default level 6 managed 43 MB/s and 22.7% (measured on one 64 MB shard of the
bench input on the development machine; docs/performance.md): one core compressed a shard in
a tenth of a second rather than a second and a half. libdeflate at level 6 stores within 1% of
zlib's level 6 at 2-3.6x its speed (`benchmarks/gzip_levels.py`), but only compresses whole
buffers: at levels 4-9 each piece given to `compress()` (the shard writer gives 1 MiB of the
framed stream at a time) becomes a gzip member of its own, and a file of several members is
one gzip stream to every reader. Without `isal` or `deflate` installed, zlib compresses at the
same level.
"""

from __future__ import annotations

import zlib
from typing import Any

from beam_jobs.core.compression import DEFAULT_GZIP_LEVEL, GZIP_LEVELS

__all__ = ["compressor", "engine", "gzip_bytes"]

_ISAL_LEVELS = range(1, 4)  # ISA-L's levels are 0-3; 0 compresses less than zlib's 1
_GZIP_WBITS = 31  # a gzip header and trailer around the DEFLATE stream


def _isal() -> Any:
    try:
        from isal import isal_zlib
    except ImportError:
        return None
    return isal_zlib


def _libdeflate() -> Any:
    try:
        import deflate
    except ImportError:
        return None
    return deflate


def engine(level: int) -> str:
    """Which library compresses at `level`: "isal", "libdeflate" or "zlib"."""
    if level in _ISAL_LEVELS:
        return "isal" if _isal() is not None else "zlib"
    return "libdeflate" if _libdeflate() is not None else "zlib"


class _Members:
    """libdeflate behind a compress object's interface: each `compress(data)` returns `data`
    as one gzip member; `flush()` returns an empty member if nothing was given, so that an
    empty shard is a gzip file as zlib's would be."""

    def __init__(self, library: Any, level: int) -> None:
        self._library = library
        self._level = level
        self._members = 0

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        if not len(data):
            return b""
        self._members += 1
        return bytes(self._library.gzip_compress(data, self._level))  # it returns a bytearray

    def flush(self) -> bytes:
        return b"" if self._members else bytes(self._library.gzip_compress(b"", self._level))


def compressor(level: int = DEFAULT_GZIP_LEVEL) -> Any:
    """A compress object writing gzip (`compress(data)`, `flush()`): one member, or at
    libdeflate's levels one member a `compress()` call."""
    if level not in GZIP_LEVELS:
        raise ValueError(f"the GZIP level must be 1 to 9, got {level}")
    kind = engine(level)
    if kind == "libdeflate":
        return _Members(_libdeflate(), level)
    library = _isal() if kind == "isal" else zlib
    return library.compressobj(level, library.DEFLATED, _GZIP_WBITS)


def gzip_bytes(data: bytes, level: int = DEFAULT_GZIP_LEVEL) -> bytes:
    """`data` as gzip, as a shard of that level stores it when written at once."""
    c = compressor(level)
    return c.compress(data) + c.flush()
