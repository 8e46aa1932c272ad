"""Parts of one GZIP shard joined into a single gzip member.

A shard written in parts (splits, many files) was their gzip members back to back. Every gzip
reader reads that as one stream, but TensorFlow's (`TFRecordDataset(compression_type="GZIP")`,
which our readers use) does not always: an empty member ends its stream (0 of 5 records read
when the first part was empty), and a member whose 8-byte trailer straddles one of its 256 KiB
reads near the file's end stops it early (DataLossError, or fewer records). So a part ends its
DEFLATE stream with a sync flush (a byte-aligned, non-final block) before the final empty block
and trailer, and says where (`OpenMember`): the join keeps the first part's header, each
part's blocks up to its flush, then writes one final empty block and a trailer whose CRC-32
is the parts' combined (ISA-L's `crc32_combine`) and whose size is theirs summed. The joined
file is one member, as a shard written whole is.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["HEADER_BYTES", "OpenMember", "check_closing", "closing", "combined"]

HEADER_BYTES = 10  # zlib's and ISA-L's gzip header: no name, comment or extra field
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # what zlib and ISA-L write at the end after a sync flush


class OpenMember(NamedTuple):
    """A part's gzip member: its stored bytes up to and including its sync flush and their
    CRC32C, and the CRC-32 and length of what it compresses."""

    open_bytes: int
    open_crc32c: int
    crc32: int
    length: int


def closing(crc32: int, length: int) -> bytes:
    """The end of a member whose blocks so far end in a sync flush: a final empty block and
    the trailer (CRC-32, length modulo 2**32)."""
    return _FINAL_EMPTY_BLOCK + struct.pack("<II", crc32, length & 0xFFFFFFFF)


def check_closing(tail: bytes, crc32: int, length: int) -> None:
    """Checks that a compressor's last output after a sync flush is exactly `closing`: the
    join writes that end itself.

    Raises:
      RuntimeError: naming what it wrote instead (another DEFLATE library's habits).
    """
    if tail != closing(crc32, length):
        raise RuntimeError(
            f"a GZIP part's compressor ended its stream with {tail.hex()!r}, not a final empty "
            "block and its trailer: the parts of a shard could not be joined into one member"
        )


def combined(members: Sequence[OpenMember]) -> tuple[int, int]:
    """The CRC-32 and length of the parts' data one after the other."""
    from isal import isal_zlib  # a dependency: zlib in Python's library has no combine

    crc, length = 0, 0
    for member in members:
        crc = isal_zlib.crc32_combine(crc, member.crc32, member.length)
        length += member.length
    return crc, length
