"""ZIP archives as containers of input files: each member is an input of its own.

A member is named `archive.zip!member.csv` (as Java's jar URLs name them) in the plan, the
dead letter and the manifest. Members are read like the other compressed inputs: whole, by one
writer, streamed through `zipfile` (bounded memory whatever the size), with the archive's size
and modification time as the member's stamp. A member whose stored CRC-32 does not match its
content, or an archive that is not a ZIP file, is a `DataError` naming it.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile
from beam_jobs.core.paths import is_local, split_member

# The suffixes `compressed` decompresses (named here: that module builds on this one; a test
# holds the two lists together).
PACKED_SUFFIXES = (".gz", ".bz2", ".zst")

__all__ = [
    "PACKED_SUFFIXES",
    "is_archive",
    "list_members",
    "member_names",
    "member_size",
    "open_member",
]


def is_archive(path: str) -> bool:
    """A file listed as an input that holds input files (`.zip`), not one itself."""
    return path.lower().endswith(".zip") and split_member(path) is None


def _wanted(info: zipfile.ZipInfo) -> bool:
    name = posixpath.basename(info.filename)
    # Folders, macOS's resource forks (__MACOSX/, ._name) and hidden files are no inputs.
    return not (info.is_dir() or name.startswith(".") or info.filename.startswith("__MACOSX/"))


def member_names(path: str) -> list[str]:
    """The names of the input files an archive holds; [] when it cannot be read (the plan
    then says why)."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            return [i.filename for i in zipfile.ZipFile(f).infolist() if _wanted(i)]
    except Exception:  # not there, not a ZIP archive: told when the inputs are listed
        return []


def list_members(archive: InputFile) -> list[InputFile]:
    """The archive's members as input files (sized by their stored bytes), in archive order.

    Raises:
      DataError: naming an archive that is not a ZIP file, or holds no file.
    """
    try:
        with FileSystems.open(archive.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            infos = zipfile.ZipFile(f).infolist()
    except zipfile.BadZipFile as e:
        raise DataError(f"{archive.path}: not a ZIP archive ({e})") from None
    wanted = [info for info in infos if _wanted(info)]
    if not wanted:
        raise DataError(f"{archive.path}: the ZIP archive holds no file")
    names = [info.filename for info in wanted]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        # zipfile opens the last of them by name: the others could never be read.
        raise DataError(
            f"{archive.path}: the ZIP archive holds more than one member named "
            f"{', '.join(map(repr, twice))}; rebuild it with one of each"
        )
    packed = [n for n in names if n.lower().endswith(PACKED_SUFFIXES)]
    if packed:
        raise DataError(
            f"{archive.path}!{packed[0]}: a compressed file inside a ZIP archive is not read; "
            "unzip the archive first"
        )
    _refuse_clashing_files(archive.path, names)
    return [
        InputFile(
            f"{archive.path}!{info.filename}",
            info.compress_size,
            (),  # read whole, from its start, by one writer
            archive.modified,
            archive.stamp,
        )
        for info in wanted
    ]


def _refuse_clashing_files(archive: str, names: list[str]) -> None:
    """Raises DataError when a file of its own is named as a member of the archive would be
    (`sales.zip!2024.csv` beside `sales.zip`): that name reads the file (`split_member`),
    so the member could not be read. Local archives: elsewhere a request a member."""
    if not is_local(archive):
        return
    for name in names:
        if split_member(f"{archive}!{name}") is None:
            raise DataError(
                f"{archive}!{name}: both a file of that name and a member of the ZIP archive "
                f"{archive}; rename the file, or move the archive to read its members"
            )


# What zipfile raises for a member it cannot open, and for one damaged past its header.
_UNREADABLE = (zipfile.BadZipFile, KeyError, RuntimeError, NotImplementedError, zlib.error)
_DAMAGED = (zipfile.BadZipFile, EOFError, OSError, zlib.error)


class _Member(io.RawIOBase):
    """One member's content, decompressed as it is read; closing it closes the archive."""

    def __init__(self, path: str) -> None:
        archive, member = split_member(path) or (path, "")
        self._path = path
        self._raw = FileSystems.open(archive, compression_type=CompressionTypes.UNCOMPRESSED)
        try:
            self._zip = zipfile.ZipFile(self._raw)
            info = self._zip.getinfo(member)
            self._member = self._zip.open(info)
        except _UNREADABLE as e:  # encrypted (RuntimeError), Deflate64 (NotImplementedError)
            self._raw.close()
            raise DataError(f"{path}: cannot be read from its archive ({e})") from None
        self.size = info.file_size  # the member's content bytes, as the archive records them

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._member.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._member.seek(offset, whence)  # backwards: decompressed again from the start

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._member.read(len(buffer))
        except _DAMAGED as e:  # a bad CRC-32, a cut archive, a broken DEFLATE stream
            raise DataError(f"{self._path}: the ZIP member is damaged ({e})") from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._member.close()
            self._zip.close()
            self._raw.close()
        super().close()


def open_member(path: str, buffer_size: int) -> io.BufferedReader:
    """Opens `archive.zip!member` for reading its content."""
    return io.BufferedReader(_Member(path), buffer_size=buffer_size)


def member_size(stream: io.BufferedReader) -> int:
    """The content bytes of a member `open_member` opened, as its archive records them."""
    member = stream.raw
    assert isinstance(member, _Member)
    return member.size
