"""With splits: each split's shard made from its write tasks' parts, in task order.

A write task reads its pieces of the input once and writes each split's rows to a file of its
own: a part of that split's shard (`plan_split_tasks`). A shard of one part is that part; a
shard of several is their files one after the other, which is a valid TFRecord file (framed
records back to back). GZIP parts are joined into one gzip member (`codec.gzip_member`: each
part's blocks up to its sync flush, one closing block and trailer), since TensorFlow's reader
does not always read members back to back. The records are those the shard's byte range of
the input holds, in input order, as when each split's writers read all of the input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

import apache_beam as beam
import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.gzip_member import HEADER_BYTES, OpenMember, closing, combined
from beam_jobs.core.errors import DataError, raised_for_launcher
from beam_jobs.core.paths import is_local
from beam_jobs.core.tasks import WriteTask, WrittenShard
from beam_jobs.sink import commits
from beam_jobs.sink.dead_letter import dead_letter_temp_path
from beam_jobs.sink.run_files import create_run_file
from beam_jobs.stats.packed import PackedStats, merge_all
from tfdata_reader.manifest import Counts

__all__ = ["JoinParts", "join_files", "join_parts", "merged_tallies", "tasks_by_shard"]

_CHUNK = 8 << 20


def _shard_key(part: WrittenShard) -> tuple[str, int]:
    return part.split or "", part.index


# A stretch of a part's file to copy: (path, first byte, end byte or None for its end).
_Stretch = tuple[str, int, int | None]


def _copy(stretches: list[_Stretch], out: BinaryIO, size: int, crc: int) -> tuple[int, int]:
    """Writes the files' stretches to `out` one after the other; returns the size and CRC32C
    of what `out` then holds (`size` and `crc`: of what it held before)."""
    for path, start, end in stretches:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            f.seek(start)
            left = None if end is None else end - start
            while left is None or left > 0:
                chunk = f.read(_CHUNK if left is None else min(_CHUNK, left))
                if not chunk:
                    break
                out.write(chunk)
                size += len(chunk)
                crc = google_crc32c.extend(crc, chunk)
                if left is not None:
                    left -= len(chunk)
            if left:
                raise DataError(f"{path}: ends {left} bytes before the part's size")
    return size, crc


def _layout(parts: list[WrittenShard]) -> tuple[tuple[int, int], list[_Stretch], bytes]:
    """How the joined file is made: the size and CRC32C of the first part's bytes kept in
    place, the other parts' stretches after them, and the bytes that end it. Framed records
    are copied whole; GZIP parts' blocks up to each one's sync flush (the first's header kept,
    the others' left out), then one closing block and trailer."""
    first = parts[0]
    if first.member is None:  # not GZIP: whole files
        rest: list[_Stretch] = [(p.temp_path, 0, None) for p in parts[1:]]
        return (first.bytes, int(first.crc32c, 16)), rest, b""
    opened = []
    for part in parts:
        if part.member is None:
            raise DataError(f"{part.name}: a part of a GZIP shard was not written to be joined")
        opened.append(OpenMember(*part.member))
    pairs = zip(parts[1:], opened[1:], strict=True)
    rest = [(p.temp_path, HEADER_BYTES, m.open_bytes) for p, m in pairs]
    kept = (opened[0].open_bytes, opened[0].open_crc32c)
    return kept, rest, closing(*combined(opened))


def _concatenate(parts: list[WrittenShard], temp_dir: str, attempt: str) -> tuple[str, int, str]:
    """The parts' files as one: (its path, size, CRC32C). On local disk the other parts are
    appended to the first (only they are copied); elsewhere all go to a new file."""
    first = parts[0]
    (kept, crc), rest, end = _layout(parts)
    if is_local(first.temp_path):
        with open(first.temp_path, "r+b") as out:
            out.truncate(kept)  # as written, up to the join: a retried join appends once
            out.seek(kept)
            size, crc = _copy(rest, out, kept, crc)
            out.write(end)
        return first.temp_path, size + len(end), f"{google_crc32c.extend(crc, end):08x}"
    path = FileSystems.join(temp_dir, commits.attempt_name(f"{first.name}.joined", attempt))
    with create_run_file(path) as out:
        size, crc = _copy([(first.temp_path, 0, kept), *rest], out, 0, 0)
        out.write(end)
    return path, size + len(end), f"{google_crc32c.extend(crc, end):08x}"


def merged_tallies(
    parts: Iterable[WrittenShard],
    temp_dir: str,
    tasks: Sequence[int] | None = None,
    attempt: str = "",
) -> WrittenShard:
    """What the parts of one shard (of different write tasks) read, wrote and set aside, as
    one `WrittenShard` (the first part's file; dead letters joined into one file, statistics
    merged). `join_parts` joins their files too; a shuffled conversion's second pass writes
    the shard anew (`sink.shuffle`).

    Raises:
      DataError: when `tasks` (the write tasks the plan gives the shard) are not the parts'
        (a runner that lost or repeated elements between the stages).
    """
    parts = sorted(parts, key=lambda p: p.part)
    if tasks is not None and [p.part for p in parts] != list(tasks):
        name = parts[0].name if parts else "a shard"
        raise DataError(
            f"rows in != rows out: {name} is made of the parts of write tasks "
            f"{list(tasks)}, but the parts of {[p.part for p in parts]} arrived between the "
            "stages WriteShards and JoinParts; nothing was published"
        )
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    dead_letters = [p.dead_letter_temp_path for p in parts if p.dead_letter_temp_path]
    dead_letter = None
    if dead_letters:
        dead_letter = dead_letter_temp_path(temp_dir, first.name, attempt)
        with create_run_file(dead_letter) as f:
            _copy([(path, 0, None) for path in dead_letters], f, 0, 0)
    # The parts' quantile edges go into one sketch, which publishing merges as it is.
    stats = PackedStats(merge_all(p.stats for p in parts))  # sent on as one blob
    return dataclasses.replace(
        first,
        records=sum(p.records for p in parts),
        counts=Counts.total(p.counts for p in parts),
        dead_letter_temp_path=dead_letter,
        covered=tuple(c for p in parts for c in p.covered),
        label_values=tuple(sorted({v for p in parts for v in p.label_values})),
        stats=stats,
        part=0,
    )


def join_files(
    parts: Iterable[WrittenShard],
    temp_dir: str,
    tasks: Sequence[int] | None = None,
    attempt: str = "",
) -> tuple[WrittenShard, list[str]]:
    """One shard from its parts (all of one split's shard, from different tasks, or the
    units of a shuffled shard): `merged_tallies`, and their files one after the other.
    Returns it and the files it no longer needs (the other parts and their dead letters),
    to remove once it is committed (`attempt`: the join's, which names its new files).

    Raises:
      DataError: when `tasks` (the parts the plan gives the shard) are not the parts'.
    """
    attempt = attempt or commits.new_attempt()
    parts = sorted(parts, key=lambda p: p.part)
    merged = merged_tallies(parts, temp_dir, tasks, attempt)
    if len(parts) == 1:
        return merged, []
    temp_path, size, crc = _concatenate(parts, temp_dir, attempt)
    dead_letters = [p.dead_letter_temp_path for p in parts if p.dead_letter_temp_path]
    consumed = [p.temp_path for p in parts if p.temp_path != temp_path] + dead_letters
    seek, records, framed = [], 0, 0
    for part in parts:  # each part's seek points, and its start, past the parts before it
        seek += [(records, framed)] if records else []
        seek += [(records + r, framed + o) for r, o in part.seek]
        records, framed = records + part.records, framed + part.framed_bytes
    known = all(p.framed_bytes or not p.records for p in parts)
    joined = dataclasses.replace(
        merged,
        temp_path=temp_path,
        bytes=size,
        crc32c=crc,
        member=None,  # closed: one whole member
        seek=tuple(point for point in seek if 0 < point[0] < records) if known else (),
        framed_bytes=framed,
    )
    return joined, consumed


def join_parts(
    parts: Iterable[WrittenShard], temp_dir: str, tasks: Sequence[int] | None = None
) -> WrittenShard:
    """`join_files`, and the files it no longer needs removed."""
    joined, consumed = join_files(parts, temp_dir, tasks)
    if consumed:
        FileSystems.delete(consumed)
    return joined


def _join_in_worker(
    keyed: tuple[tuple[str, int], Iterable[WrittenShard]],
    temp_dir: str,
    parts: dict[tuple[str, int], tuple[int, ...]],
    run_id: str,
) -> WrittenShard:
    """A shard's join: a failed run's, checked and reused, or done now and committed before
    the parts it consumed are removed (`run_id` "": a run without a launcher, no records)."""
    with raised_for_launcher():
        given = list(keyed[1])
        if not run_id:
            return join_parts(given, temp_dir, parts[keyed[0]])
        split, shard = keyed[0]
        key = commits.join_key(split or None, shard)
        kept = commits.reuse(temp_dir, key, run_id)
        if kept is not None:  # its tasks are counted as this run's parts count them
            total = Counts.total(p.counts for p in given)
            counts = dataclasses.replace(
                kept.counts, tasks=total.tasks, tasks_reused=total.tasks_reused
            )
            return dataclasses.replace(kept, counts=counts)
        attempt = commits.new_attempt()
        joined, consumed = join_files(given, temp_dir, parts[keyed[0]], attempt)
        files = [commits.KeptFile(joined.temp_path, joined.bytes, joined.crc32c)]
        if consumed and joined.dead_letter_temp_path:  # merged here: read back once
            path = joined.dead_letter_temp_path
            files.append(commits.KeptFile(path, *commits.file_crc32c(path)))
        commits.commit(temp_dir, key, attempt, joined, files)
        if consumed:
            FileSystems.delete(consumed)
        return joined


def tasks_by_shard(tasks: Sequence[WriteTask]) -> dict[tuple[str, int], tuple[int, ...]]:
    """(split, shard index) -> the write tasks whose parts make that shard, in order."""
    found: dict[tuple[str, int], list[int]] = {}
    for task in tasks:
        for part in task.parts:
            found.setdefault((part.split or "", part.index), []).append(task.index)
    return {key: tuple(indexes) for key, indexes in found.items()}


class JoinParts(beam.PTransform[Any, Any]):
    """Parts (`WrittenShard`s with `part`) -> one `WrittenShard` per shard; each shard's parts
    are checked against those the plan gives it (`parts`: (split or "", shard) -> parts, as
    `tasks_by_shard` gives them for write tasks)."""

    def __init__(
        self,
        temp_dir: str,
        parts: dict[tuple[str, int], tuple[int, ...]],
        run_id: str = "",
    ) -> None:
        """`run_id`: the launcher's run, whose joins commit their work for a rerun and reuse
        a failed run's (`sink.commits`); "": none (no records)."""
        super().__init__()
        self._temp_dir = temp_dir
        self._parts = parts
        self._run_id = run_id

    def expand(self, parts: beam.PCollection[Any]) -> beam.PCollection[Any]:
        return (
            parts
            | "KeyByShard" >> beam.Map(lambda part: (_shard_key(part), part))
            | "GroupParts" >> beam.GroupByKey()
            | "Concatenate"
            >> beam.Map(
                _join_in_worker,
                temp_dir=self._temp_dir,
                parts=self._parts,
                run_id=self._run_id,
            )
        )
