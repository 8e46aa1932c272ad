"""Old Mac line ends: a file whose lines end in a lone CR (`\r`; Excel for Mac and classic Mac
OS export so) reads as if they ended in LF. pyarrow's CSV parser takes a lone CR as a line end,
but everything here that finds records, cuts files and counts lines looks for LF: without this,
such a file past the sample size had "no complete header line".

The translation is byte for byte (`CR -> LF`), so offsets, sizes, cuts and seek points are the
file's own. A file is CR-only when its first 64 KiB hold a CR and no LF. The first file decides
whether a conversion looks (`open_input(..., cr_lines=True)`, the counts before each cut and
the bad rows' line numbers alike: `Counting.cr_lines`): when it is CR-only, every open of a
file looks at that file's first bytes and translates it when it is CR-only too (a CRLF file
among them is read as it is); else no open pays the look. A CR inside a quoted value of a
CR-only file (its line break) reads as LF.
"""

from __future__ import annotations

import io
from typing import BinaryIO, cast

__all__ = ["CrLines", "cr_only", "opened_as_lf", "with_lf"]

_LOOKED_AT = 64 << 10
_CR_TO_LF = bytes.maketrans(b"\r", b"\n")


def cr_only(head: bytes) -> bool:
    """Whether a file's first bytes end their lines in CR alone."""
    head = head[:_LOOKED_AT]
    return b"\r" in head and b"\n" not in head


def with_lf(data: bytes) -> bytes:
    """`data` with every CR as LF."""
    return data.translate(_CR_TO_LF)


class CrLines(io.BufferedIOBase):
    """A seekable stream read with every CR as LF, byte for byte."""

    def __init__(self, inner: BinaryIO) -> None:
        super().__init__()
        self._inner = inner

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._inner.seekable()

    def read(self, size: int | None = -1) -> bytes:
        return with_lf(self._inner.read(-1 if size is None else size))

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def close(self) -> None:
        self._inner.close()
        super().close()


def opened_as_lf(stream: BinaryIO) -> BinaryIO:
    """`stream` (just opened, at its start), read as `CrLines` when its file's first bytes end
    their lines in CR alone; else as it is (a CRLF file among CR-only ones keeps its CRs)."""
    peek = getattr(stream, "peek", None)
    if peek is not None:
        head = peek(_LOOKED_AT)
    else:
        head = stream.read(_LOOKED_AT)
        stream.seek(0)
    return cast(BinaryIO, CrLines(stream)) if cr_only(head) else stream
