"""Opening inputs, compressed or not, and reading their heads with bounded memory.

`.gz`, `.bz2` and `.zst` inputs are decompressed on the fly. The stream must end properly:
a file cut short (no end-of-stream marker) or with garbage after its end is a `DataError`
naming the file, not a silently shorter input. Concatenated members (as `cat a.gz b.gz` makes)
are read one after another, as gzip, bzip2 and zstd tools do. Each decompression step yields at
most a few MiB, so a decompression bomb costs time, not memory.
"""

from __future__ import annotations

import bz2
import dataclasses
import enum
import io
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile
from beam_jobs.core.paths import split_member
from beam_jobs.formats.lines.line_ends import cr_only, opened_as_lf, with_lf
from beam_jobs.formats.zip_members import member_size, open_member

__all__ = [
    "COMPRESSED_SUFFIXES",
    "CONTAINER_SUFFIXES",
    "Codec",
    "Head",
    "compression_of",
    "open_input",
    "read_head",
]


class Codec(str, enum.Enum):
    """A compressed input's kind, by its suffix (or, for TFRecord files, its magic bytes)."""

    GZIP = "gzip"
    BZIP2 = "bzip2"
    ZSTD = "zstd"
    ZIP = "zip"  # a member of a ZIP archive (`zip_members`), named archive.zip!member

    def __str__(self) -> str:
        return self.value


COMPRESSED_SUFFIXES = {".gz": Codec.GZIP, ".bz2": Codec.BZIP2, ".zst": Codec.ZSTD}
_STEP_OUTPUT = 4 << 20  # largest output of one decompression step (zlib, bzip2)
# zstd's decompressor cannot bound one step's output, so it is fed one block at a time: a
# block's content is at most 128 KiB, however small the block is stored (an RLE block: 1 byte).
_RAW_READ = dict.fromkeys(Codec, 1 << 20)
# What `guess_format` and the CSV dialect strip from a name to find its format.
CONTAINER_SUFFIXES = (*COMPRESSED_SUFFIXES, ".zip")
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)
_BUFFER = 1 << 20
_HEAD_RAW_READ = 64 << 10


def compression_of(path: str) -> Codec | None:
    """'gzip', 'bzip2' or 'zstd' from the file name's suffix, 'zip' for a ZIP archive's member;
    None for an uncompressed file."""
    if split_member(path):
        return Codec.ZIP
    for suffix, kind in COMPRESSED_SUFFIXES.items():
        if path.lower().endswith(suffix):
            return kind
    return None


def _new_decompressor(kind: Codec) -> Any:
    if kind == Codec.GZIP:
        return zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
    if kind == Codec.BZIP2:
        return bz2.BZ2Decompressor()
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj()


def _step(kind: Codec, decompressor: Any, data: bytes) -> tuple[bytes, bytes, bool]:
    """One bounded decompression step over `data`.

    Returns (output, input left for later steps or the next member, whether this decompressor
    may have more output without new input).
    """
    if kind == Codec.GZIP:
        out = decompressor.decompress(data, _STEP_OUTPUT)
        rest = decompressor.unused_data if decompressor.eof else decompressor.unconsumed_tail
        return out, rest, len(out) == _STEP_OUTPUT
    if kind == Codec.BZIP2:
        # The decompressor keeps input it has not used yet; b"" asks for more of its output.
        out = decompressor.decompress(data, _STEP_OUTPUT)
        if decompressor.eof:
            return out, decompressor.unused_data, False
        return out, b"", not decompressor.needs_input
    out = decompressor.decompress(data)
    return out, decompressor.unused_data if decompressor.eof else b"", False


class _ZstdUnits:
    """Cuts a zstd stream into the pieces the decompressor is fed: a frame header, one block,
    a checksum (skippable frames and zero padding between frames are dropped), so that no
    piece gives more than one block's content. Bytes that are not a zstd frame are handed on as
    they are, for the decompressor to name the problem."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._state = "frame"
        self._checksum = False

    @property
    def pending(self) -> int:
        """Buffered bytes that do not make a whole piece yet (at the end: truncation)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._buffer += data
        while (unit := self._next()) is not None:
            if unit:
                yield unit

    def _take(self, size: int) -> bytes:
        unit = bytes(self._buffer[:size])
        del self._buffer[:size]
        return unit

    def _next(self) -> bytes | None:
        """The next unit of the stream when the buffer holds all of it (b"" for padding or a
        skippable frame, dropped), else None."""
        if self._state == "block":
            return self._block()
        if self._state == "checksum":
            if len(self._buffer) < 4:
                return None
            self._state = "frame"
            return self._take(4)
        return self._frame_start()

    def _block(self) -> bytes | None:
        buffer = self._buffer
        if len(buffer) < 3:
            return None
        header = int.from_bytes(buffer[:3], "little")
        size = 3 + (1 if (header >> 1) & 3 == 1 else header >> 3)  # RLE: one stored byte
        if len(buffer) < size:
            return None
        if header & 1:  # the frame's last block
            self._state = "checksum" if self._checksum else "frame"
        return self._take(size)

    def _frame_start(self) -> bytes | None:
        buffer = self._buffer
        stripped = buffer.lstrip(b"\0")  # zero padding between or after frames
        if len(stripped) < len(buffer):
            del buffer[: len(buffer) - len(stripped)]
            return b""
        if len(buffer) < 5:
            return None
        magic = int.from_bytes(buffer[:4], "little")
        if magic in _ZSTD_SKIPPABLE:
            if len(buffer) < 8:
                return None
            size = 8 + int.from_bytes(buffer[4:8], "little")
            if len(buffer) < size:
                return None
            self._take(size)
            return b""
        if magic != _ZSTD_MAGIC:
            return self._take(len(buffer))
        descriptor = buffer[4]
        single_segment = (descriptor >> 5) & 1
        size = 5 + (0 if single_segment else 1)
        size += (0, 1, 2, 4)[descriptor & 3]  # dictionary id
        size += (single_segment, 2, 4, 8)[descriptor >> 6]  # content size
        if len(buffer) < size:
            return None
        self._checksum = bool((descriptor >> 2) & 1)
        self._state = "block"
        return self._take(size)


class _Members:
    """The decompressed content of a stored stream, member after member, in bounded steps."""

    def __init__(self, raw: BinaryIO, kind: Codec, path: str, raw_read: int | None = None) -> None:
        self._raw, self._kind, self._path = raw, kind, path
        self._raw_read = raw_read or _RAW_READ[kind]
        self.stored_bytes = 0  # stored bytes read so far
        # Stored bytes the decompressor has taken in, and content bytes it gave for them (to
        # measure the compression ratio of a file's head; bzip2 may hold one read unreported).
        self.consumed = 0
        self.produced = 0

    def _fail(self, problem: str) -> DataError:
        return DataError(
            f"{self._path}: {problem} (in its first {self.stored_bytes:,} stored bytes); the "
            f"file is damaged or not {self._kind}: fix or remove it"
        )

    def _inputs(self) -> Iterator[bytes]:
        """What the decompressor is fed: stored reads, or for zstd one block at a time."""
        units = _ZstdUnits() if self._kind == Codec.ZSTD else None
        while data := self._raw.read(self._raw_read):
            self.stored_bytes += len(data)
            if units is None:
                yield data
            else:
                yield from units.feed(data)
        if units is not None and units.pending:
            raise self._fail("the zstd stream ends inside a frame: it is truncated")

    def __iter__(self) -> Iterator[bytes]:
        kind = self._kind
        decompressor, fed = _new_decompressor(kind), False
        for data in self._inputs():
            while True:
                if decompressor.eof:
                    if not data.strip(b"\0"):
                        break  # nothing, or zero padding, after a member
                    decompressor, fed = _new_decompressor(kind), False  # the next member
                try:
                    before = len(data)
                    out, data, more = _step(kind, decompressor, data)
                except Exception as e:  # zlib.error, OSError, zstandard.ZstdError
                    raise self._fail(f"cannot decompress: {e}") from None
                fed = True
                self.consumed += before - len(data)
                self.produced += len(out)
                if out:
                    yield out
                if not decompressor.eof and not data and not more:
                    break  # needs the next stored bytes
        if fed and not decompressor.eof:
            raise self._fail(f"the {kind} stream ends before its end marker: it is truncated")


class _DecompressedFile(io.RawIOBase):
    """A compressed file's content as a readable, seekable stream (seeking back restarts)."""

    def __init__(self, path: str, kind: Codec, raw_read: int | None = None) -> None:
        self._path, self._kind, self._raw_read = path, kind, raw_read
        self._raw: BinaryIO | None = None
        self._restart()

    def _restart(self) -> None:
        if self._raw is not None:
            self._raw.close()
        self._raw = FileSystems.open(self._path, compression_type=CompressionTypes.UNCOMPRESSED)
        self.members = _Members(self._raw, self._kind, self._path, self._raw_read)
        self._chunks = iter(self.members)
        self._pending = memoryview(b"")
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self._position += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self._position + offset
        if whence not in (io.SEEK_SET, io.SEEK_CUR) or target < 0:
            raise io.UnsupportedOperation("a compressed input seeks from its start or forward")
        if target < self._position:
            self._restart()
        scratch = bytearray(min(_BUFFER, max(1, target - self._position)))
        while self._position < target:
            view = memoryview(scratch)[: target - self._position]
            if not self.readinto(view):
                break
        return self._position

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
        super().close()


def open_input(path: str, compression: Codec | None = None, cr_lines: bool = False) -> BinaryIO:
    """Opens an input (local or gs://) for reading, decompressing on the fly when asked; with
    `cr_lines` (a conversion whose first file is CR-only), a CR-only file reads with LF
    (`lines.line_ends`).

    A compressed stream that is cut short or damaged raises `DataError` naming the file when
    reading reaches the damage.
    """
    stream = _opened(path, compression)
    return opened_as_lf(stream) if cr_lines else stream


def _opened(path: str, compression: Codec | None) -> BinaryIO:
    if compression is None:
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    if compression == Codec.ZIP:
        return open_member(path, _BUFFER)
    return io.BufferedReader(_DecompressedFile(path, compression), buffer_size=_BUFFER)


@dataclasses.dataclass(frozen=True)
class Head:
    """The first bytes of a file's content, how many stored bytes one content byte takes, and
    whether they are the whole file."""

    content: bytes
    stored_per_byte: float
    is_whole_file: bool


def read_head(
    f: InputFile, num_bytes: int, compression: Codec | None = None, cr_lines: bool = False
) -> Head:
    """Reads up to `num_bytes` bytes of a file's content (decompressed: memory stays bounded
    whatever the compression ratio); the ratio of stored to content bytes is measured on them.
    With `cr_lines`, a CR-only file's head reads with LF, as `open_input` reads it.
    """
    head = _read_head(f, num_bytes, compression)
    if cr_lines and cr_only(head.content):
        return dataclasses.replace(head, content=with_lf(head.content))
    return head


def _read_head(f: InputFile, num_bytes: int, compression: Codec | None) -> Head:
    if compression is None:
        with open_input(f.path) as stream:
            stored = stream.read(num_bytes)
        return Head(stored, 1.0, len(stored) >= f.size)
    if compression == Codec.ZIP:
        with open_member(f.path, _BUFFER) as stream:
            content = stream.read(num_bytes + 1)
            whole = len(content) <= num_bytes
            # The member's stored bytes spread evenly over its content: a fair ratio.
            ratio = f.size / max(1, len(content) if whole else member_size(stream))
        return Head(content[:num_bytes], ratio, whole)
    # Small stored reads, so that the ratio is measured on about the bytes the head took.
    raw = _DecompressedFile(f.path, compression, raw_read=_HEAD_RAW_READ)
    try:
        content = io.BufferedReader(raw, buffer_size=_HEAD_RAW_READ).read(num_bytes + 1)
    finally:
        raw.close()
    whole = len(content) <= num_bytes
    members = raw.members
    ratio = (f.size if whole else members.consumed) / max(1, members.produced)
    return Head(content[:num_bytes], ratio, whole)
