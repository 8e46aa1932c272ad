"""Looking inside gzip files the way TensorFlow's reader would meet them."""

from __future__ import annotations

import zlib


def gzip_members(stored: bytes) -> int:
    """How many gzip members `stored` holds, one after the other (each must end)."""
    count = 0
    while stored:
        member = zlib.decompressobj(31)
        member.decompress(stored)
        assert member.eof, "a gzip member does not end"
        stored, count = member.unused_data, count + 1
    return count
