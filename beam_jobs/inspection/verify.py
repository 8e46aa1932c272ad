"""`verify`: re-read every shard and compare it with what the manifest promises.

Checks that the manifest's counts add up (records read = written + set aside; written = the
shards' records), then, per shard: the file exists, its stored size and CRC32C match, and walking
its records (after GZIP decompression) finds exactly the listed count with every record checksum
intact. The companion files the manifest lists (`schema.pbtxt`, `statistics.pb`, TFDS's files)
must match their recorded size and CRC32C. It also reports shard-like files in the output
directory that the manifest does not list.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import zlib
from typing import Any, BinaryIO

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.framing import count_records
from beam_jobs.core.compression import Compression
from beam_jobs.core.errors import FramingError
from beam_jobs.publish.companions import companion_mismatches
from beam_jobs.publish.lease import read_lease
from beam_jobs.publish.output_dir import load_manifest
from tfdata_reader.manifest import MANIFEST_NAME, Manifest, ShardInfo

_log = logging.getLogger(__name__)

__all__ = ["ShardProblem", "verify"]

_CHUNK = 8 << 20


@dataclasses.dataclass(frozen=True)
class ShardProblem:
    """What is wrong with one file of the dataset."""

    path: str
    problem: str


class _Measured:
    """A read-through stream that sizes and checksums the stored bytes it passes on."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.bytes = 0
        self.crc = 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self.bytes += len(data)
        self.crc = google_crc32c.extend(self.crc, data)
        return data

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass


class _GzipMembers(io.RawIOBase):
    """A gzip file's data, member after member (as `gzip.GzipFile` reads it), counting the
    members and those that hold nothing."""

    def __init__(self, raw: _Measured) -> None:
        self._raw = raw
        self._member: Any = None  # the member being read
        self._held = 0  # bytes its data held so far
        self._out, self._at = b"", 0
        self._done = False
        self.members = 0
        self.empty = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at == len(self._out) and not self._done:
            self._fill()
        count = min(len(buffer), len(self._out) - self._at)
        buffer[:count] = self._out[self._at : self._at + count]
        self._at += count
        return count

    def _fill(self) -> None:
        data, found = self._raw.read(_CHUNK), []
        if not data:
            if self._member is not None or not self.members:
                raise EOFError("the gzip stream ends before its end marker")
            self._done = True
        while data:
            if self._member is None:
                self._member, self._held = zlib.decompressobj(31), 0
            out = self._member.decompress(data)
            self._held += len(out)
            found.append(out)
            data = b""
            if self._member.eof:
                self.members += 1
                self.empty += not self._held
                data, self._member = self._member.unused_data, None
        self._out, self._at = b"".join(found), 0


def _check_shard(path: str, shard: ShardInfo, compression: Compression) -> list[str]:
    problems = []
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
        measured = _Measured(raw)
        records: int | None = None
        stream: Any = measured
        members = None
        if compression == Compression.GZIP:
            members = _GzipMembers(measured)  # reads through it
            stream = io.BufferedReader(members, _CHUNK)
        try:
            records = count_records(stream)
        except FramingError as e:
            problems.append(f"bad record framing: {e}")
        except (OSError, EOFError, zlib.error) as e:
            problems.append(f"cannot decompress: {e}")
        measured.drain()
    if members is not None and records is not None and members.members > 1:
        # Written before shards were one member each: TensorFlow's reader stops at an empty
        # member, and sometimes at a member's end, reading fewer records than the file holds.
        empty = f", {members.empty} of them empty" if members.empty else ""
        problems.append(
            f"{members.members} gzip members{empty}: TensorFlow's GZIP reader may read fewer "
            "records than it holds; convert it again (shards are now written as one member)"
        )
    problems.extend(shard.mismatches(size=measured.bytes, crc32c=measured.crc))
    if records is not None and records != shard.records:
        problems.append(f"holds {records} records, manifest says {shard.records}")
    return problems


def _count_problems(manifest: Manifest) -> list[str]:
    """The manifest's counts must add up: records read = written + set aside, and written =
    the records its shards list."""
    counts = manifest.counts
    if not counts.recorded:
        return []
    found = []
    read, written, bad = counts.records_read, counts.records_written, counts.bad_records
    if written is not None and written != manifest.total_records:
        found.append(
            f"counts say {written:,} records were written, the shards list "
            f"{manifest.total_records:,}"
        )
    if read is not None and written is not None and read != written + bad:
        found.append(
            f"counts say {read:,} records were read but {written:,} written and {bad:,} set "
            "aside: rows in != rows out"
        )
    return found


def _generation(name: str) -> int:
    found = re.search(r"\.g(\d+)\.tfrecord", name)
    return int(found.group(1)) if found else 0


def _leased(output: str) -> bool:
    """Whether a live conversion holds the folder (a lease we cannot read counts as held)."""
    try:
        lease = read_lease(output)[0]
        return lease is not None and not lease.is_stale()
    except Exception:
        return True


def _verify_once(output: str, manifest: Manifest) -> list[ShardProblem]:
    problems = [ShardProblem(MANIFEST_NAME, p) for p in _count_problems(manifest)]
    for shard in manifest.shards:
        path = FileSystems.join(output, shard.path)
        if not FileSystems.exists(path):
            problems.append(ShardProblem(shard.path, "missing"))
            continue
        problems.extend(
            ShardProblem(shard.path, p) for p in _check_shard(path, shard, manifest.compression)
        )
    publishing = _leased(output)
    for companion in manifest.companions:
        found = companion_mismatches(output, companion)
        if found == ["missing"]:
            problems.append(ShardProblem(companion.path, "missing"))
        elif found and publishing:  # a running conversion writes its own before its manifest
            _log.info("%s: being replaced by a running conversion", companion.path)
        elif found:
            problems.extend(
                ShardProblem(companion.path, f"{p} (not the file this manifest published)")
                for p in found
            )
    listed = {s.path for s in manifest.shards}
    for meta in FileSystems.match([FileSystems.join(output, "*.tfrecord*")])[0].metadata_list:
        name = meta.path.rstrip("/").rsplit("/", 1)[-1]
        if name in listed or name.startswith("."):  # ours: the lease, temporary folders
            continue
        if publishing and _generation(name) > manifest.generation:
            _log.info("%s: the next generation, being published by a running conversion", name)
            continue
        problems.append(ShardProblem(name, "not listed in the manifest"))
    return problems


def verify(output: str, attempts: int = 3) -> tuple[Manifest, list[ShardProblem]]:
    """Checks every shard listed in `output`'s manifest; returns the manifest and all problems.

    A conversion may publish into the folder meanwhile (a new manifest, new shards, the old
    ones removed): the check is made again against the new manifest, up to `attempts` times.

    Raises:
      ManifestError: when the manifest itself is missing or malformed.
    """
    output = output.rstrip("/")
    manifest = load_manifest(output)
    for _ in range(attempts):
        problems = _verify_once(output, manifest)
        now = load_manifest(output)
        if now == manifest:
            return manifest, problems
        _log.info("%s was published anew while being verified; verifying again", output)
        manifest = now
    problems.append(
        ShardProblem(MANIFEST_NAME, f"replaced {attempts} times while being verified; try again")
    )
    return manifest, problems
