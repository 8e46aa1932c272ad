"""`diff A B`: whether two datasets hold the same records, and if not, the first difference.

Records are compared as values, not bytes: each split's records are read in shard order from
both datasets, a batch at a time, decoded to Arrow with tfx-bsl's C++ decoder and compared
column by column; only a batch that differs is looked at row by row, to name the record and
the feature. So GZIP against none, other shard sizes or another feature order inside the
Examples are "the same records, stored differently". Equal fingerprints skip the reading.

When either dataset is shuffled (its order says nothing: other shard sizes shuffle the same
records otherwise), each split's records are compared as a multiset: a 64-bit hash of each
record's values (features by name, each value's bits), sorted, compared; a record one side
holds more often than the other is then found and shown.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.codec.examples import decode_examples
from beam_jobs.core.units import count_of
from beam_jobs.publish.output_dir import load_manifest
from tfdata_reader.manifest import Manifest

__all__ = ["Difference", "compare"]

_BATCH = 4096  # records decoded and compared at once


@dataclasses.dataclass(frozen=True)
class Difference:
    """The outcome: `same` records or not, and a line for each thing worth saying."""

    same: bool
    lines: list[str]


def compare(a: str, b: str) -> Difference:
    """Compares the datasets in folders `a` and `b` (local or gs://).

    Raises:
      ManifestError, OSError, or TensorFlow's OpError: when a dataset cannot be read.
    """
    first, second = load_manifest(a), load_manifest(b)
    if first.fingerprint == second.fingerprint:
        return Difference(
            True,
            [
                f"same fingerprint ({first.fingerprint}): the manifests list the same records "
                "and bytes (`verify` checks that the files hold them)"
            ],
        )
    meaning = _meaning_differs(first, second)
    if meaning:
        return Difference(False, [meaning])
    if sorted(first.splits) != sorted(second.splits):
        return Difference(
            False, [f"the splits differ: {list(first.splits)} against {list(second.splits)}"]
        )
    names: list[str | None] = [*sorted(first.splits)] or [None]
    as_sets = first.order.shuffled or second.order.shuffled
    for split in names:
        compare_split = _first_unmatched if as_sets else _first_difference
        found = compare_split(a, first.split(split), b, second.split(split), split)
        if found is not None:
            return Difference(False, [found])
    how = "same records" + (" (compared as sets: one is shuffled)" if as_sets else "")
    return Difference(True, [f"{how}, stored differently: " + _storage(first, second)])


def _meaning_differs(first: Manifest, second: Manifest) -> str | None:
    """What makes the same stored values mean other things: the features' names and specs,
    the label and its vocabulary."""
    names = [f.name for f in first.features], [f.name for f in second.features]
    if sorted(names[0]) != sorted(names[1]):
        return f"the features differ: {names[0]} against {names[1]}"
    theirs = {f.name: f for f in second.features}
    for feature in first.features:
        other = theirs[feature.name]
        if feature != other:
            return f"feature {feature.name!r} differs: A {_spec(feature)}, B {_spec(other)}"
    if first.label != second.label:
        return f"the label differs: A {first.label!r}, B {second.label!r}"
    if first.label_vocabulary != second.label_vocabulary:
        return (
            f"the label vocabulary differs: A {first.label_vocabulary}, B {second.label_vocabulary}"
        )
    return None


def _spec(feature) -> str:
    return json.dumps(feature.to_json())


def _first_difference(
    a: str, first: Manifest, b: str, second: Manifest, split: str | None
) -> str | None:
    where = f"split {split}: " if split else ""
    left, right = _Records(a, first), _Records(b, second)
    done = 0
    while True:
        n = min(left.ready(), right.ready())
        if n == 0:
            if left.ready() == right.ready() == 0:
                return None
            longer = "A" if left.ready() else "B"
            return (
                f"{where}A holds {first.total_records:,} records, B {second.total_records:,}: "
                f"{longer} goes on after record {done:,}"
            )
        (records_x, shards_x), (records_y, _) = left.take(n), right.take(n)
        batch_x, batch_y = decode_examples(records_x), decode_examples(records_y)
        first_row: tuple[int, str] | None = None  # the earliest differing record, its feature
        for name in batch_x.schema.names:
            column_x, column_y = batch_x.column(name), batch_y.column(name)
            if _same_column(column_x, column_y):
                continue
            limit = n if first_row is None else first_row[0]
            row = next((i for i in range(limit) if not _same(column_x[i], column_y[i])), None)
            if row is not None:
                first_row = (row, name)
        if first_row is not None:
            row, name = first_row
            shard, index = shards_x[row]
            x, y = batch_x.column(name)[row].as_py(), batch_y.column(name)[row].as_py()
            return (
                f"{where}record {done + row:,} ({shard}, record {index:,} of that shard), "
                f"feature {name!r}: A {x!r}, B {y!r}"
            )
        done += n


def _first_unmatched(
    a: str, first: Manifest, b: str, second: Manifest, split: str | None
) -> str | None:
    """The first record of A (in shard order) that B holds fewer times, or of B that A does,
    beside B's closest such record when there is one: None when both hold the same records
    as often."""
    where = f"split {split}: " if split else ""
    hashes = [_record_hashes(a, first), _record_hashes(b, second)]  # both read: both readable
    if len(hashes[0]) != len(hashes[1]):
        return f"{where}A holds {len(hashes[0]):,} records, B {len(hashes[1]):,}"
    if np.array_equal(np.sort(hashes[0]), np.sort(hashes[1])):
        return None
    extras = [_extra(hashes[0], hashes[1]), _extra(hashes[1], hashes[0])]
    side, (folder, manifest), index = (
        ("A", (a, first), int(extras[0][0])) if extras[0].size
        else ("B", (b, second), int(extras[1][0]))
    )  # fmt: skip
    [(shard, at, record)] = _records_at(folder, manifest, [index])
    if side == "A" and extras[1].size:
        paired = _paired((shard, at, record), index, b, second, extras[1][:_CANDIDATES])
        if paired:
            return where + paired
    other_side = "B" if side == "A" else "A"
    return (
        f"{where}{side} holds a record {other_side} does not (or not as often): "
        f"record {index:,} of {side} ({shard}, record {at:,} of that shard): {record}"
    )


_CANDIDATES = 1000  # B's unmatched records a record of A is paired against, at most


def _extra(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """The positions of `mine`'s records that `theirs` holds fewer times (a record held
    twice here and once there: its second occurrence), in order."""
    order = np.argsort(mine, kind="stable")
    ranked = mine[order]
    # Each record's occurrence number among its equals, in shard order.
    starts = np.searchsorted(ranked, ranked, side="left")
    occurrence = np.empty(len(mine), np.int64)
    occurrence[order] = np.arange(len(mine)) - starts
    other = np.sort(theirs)
    held = np.searchsorted(other, mine, side="right") - np.searchsorted(other, mine, side="left")
    return np.flatnonzero(occurrence >= held)


def _paired(
    found_in_a: tuple[str, int, dict[str, Any]],
    index: int,
    b: str,
    second: Manifest,
    candidates: np.ndarray,
) -> str | None:
    """A's unmatched record (`index`: its place; its shard, place there and values) beside
    the unmatched record of B that shares most of its features, naming the features that
    differ; None when none shares a feature."""
    shard, at, record = found_in_a
    best: tuple[int, int, tuple[str, int, dict[str, Any]]] | None = None
    for position, found in zip(
        candidates.tolist(), _records_at(b, second, candidates.tolist()), strict=True
    ):
        shared = sum(repr(record.get(k)) == repr(v) for k, v in found[2].items())
        if shared and (best is None or shared > best[0]):
            best = (shared, position, found)
    if best is None:
        return None
    _, position, (shard_b, at_b, other) = best
    names = sorted(set(record) | set(other))
    differing = [k for k in names if repr(record.get(k)) != repr(other.get(k))]
    values = "; ".join(f"feature {k!r}: A {record.get(k)!r}, B {other.get(k)!r}" for k in differing)
    return (
        f"A holds a record B does not: record {index:,} of A ({shard}, record {at:,} of "
        f"that shard); the closest record B holds and A does not, record {position:,} of B "
        f"({shard_b}, record {at_b:,}), differs in {values}"
    )


_MIX = np.uint64(0x9E3779B97F4A7C15)


def _column_hashes(name: str, column: pa.Array) -> np.ndarray:
    """Per row, a 64-bit hash of a list column's values (their bits, positions and count)."""
    from pandas.util import hash_array

    values = pc.list_flatten(column)
    lengths = np.asarray(pc.fill_null(pc.list_value_length(column), 0), np.int64)
    if pa.types.is_floating(values.type):
        raw = np.asarray(values.to_numpy(zero_copy_only=False)).view(np.uint32)
        value_hashes = hash_array(raw.astype(np.uint64), categorize=False)
    elif pa.types.is_integer(values.type):
        value_hashes = hash_array(
            np.asarray(values.to_numpy(zero_copy_only=False)), categorize=False
        )
    else:
        texts = np.asarray(values.to_pylist(), dtype=object)
        value_hashes = hash_array(texts, categorize=False) if len(texts) else np.zeros(0, np.uint64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    positions = np.arange(len(value_hashes), dtype=np.int64) - np.repeat(starts, lengths)
    weighted = value_hashes * ((positions.astype(np.uint64) + np.uint64(1)) * _MIX)
    rows = np.zeros(len(lengths), np.uint64)
    np.add.at(rows, np.repeat(np.arange(len(lengths)), lengths), weighted)
    name_hash = hash_array(np.array([name], dtype=object), categorize=False)[0]
    return (rows + lengths.astype(np.uint64) * _MIX) * (name_hash | np.uint64(1))


def _record_hashes(folder: str, manifest: Manifest) -> np.ndarray:
    """Each record's hash, in shard order: its features' column hashes added up (so the
    features' order inside the Examples does not matter)."""
    found = []
    for records, _ in _batches(folder, manifest):
        batch = decode_examples(records)
        total = np.zeros(batch.num_rows, np.uint64)
        for name in batch.schema.names:
            total += _column_hashes(name, batch.column(name))
        found.append(total)
    return np.concatenate(found) if found else np.zeros(0, np.uint64)


def _records_at(
    folder: str, manifest: Manifest, indices: Sequence[int]
) -> list[tuple[str, int, dict[str, Any]]]:
    """Records of a dataset by their places in shard order (read in one pass), each with its
    shard, place there and values; in the order of `indices`."""
    wanted = sorted(set(indices))
    found: dict[int, tuple[str, int, dict[str, Any]]] = {}
    done = 0
    for records, where in _batches(folder, manifest):
        lo = bisect.bisect_left(wanted, done)
        hi = bisect.bisect_left(wanted, done + len(records))
        if hi > lo:
            rows = decode_examples([records[i - done] for i in wanted[lo:hi]]).to_pylist()
            for i, row in zip(wanted[lo:hi], rows, strict=True):
                found[i] = (*where[i - done], row)
        done += len(records)
        if len(found) == len(wanted):
            break
    return [found[i] for i in indices]


def _same_column(x: pa.Array, y: pa.Array) -> bool:
    """Equal columns, floats compared bit for bit (Arrow's `equals` takes -0.0 for 0.0)."""
    if not x.equals(y):
        return False
    values_x, values_y = pc.list_flatten(x), pc.list_flatten(y)
    if not pa.types.is_floating(values_x.type):
        return True
    return bool(
        np.array_equal(
            np.asarray(values_x.to_numpy(zero_copy_only=False)).view(np.uint32),
            np.asarray(values_y.to_numpy(zero_copy_only=False)).view(np.uint32),
        )
    )


def _same(x, y) -> bool:
    """Equal values: by their text, so NaN equals NaN and -0.0 differs from 0.0 (Arrow's
    `equals` and Python's `==` say otherwise)."""
    return repr(x.as_py()) == repr(y.as_py())


class _Records:
    """A dataset's records in shard order, taken in batches of any size (two datasets' shards
    end at different places), each with its (shard, index in the shard)."""

    def __init__(self, folder: str, manifest: Manifest) -> None:
        self._batches = _batches(folder, manifest)
        self._records: list[bytes] = []
        self._where: list[tuple[str, int]] = []

    def ready(self) -> int:
        """Records at hand (reading the next batch when none is): 0 at the end."""
        if not self._records:
            batch = next(self._batches, None)
            if batch is not None:
                self._records, self._where = batch
        return len(self._records)

    def take(self, n: int) -> tuple[list[bytes], list[tuple[str, int]]]:
        taken = self._records[:n], self._where[:n]
        self._records, self._where = self._records[n:], self._where[n:]
        return taken


def _batches(
    folder: str, manifest: Manifest
) -> Iterator[tuple[list[bytes], list[tuple[Any, ...]]]]:
    """Batches of serialized records in shard order, each with (shard, index) per record."""
    import tensorflow as tf

    compression = manifest.compression.tf_name
    for shard in manifest.shards:
        path = f"{folder.rstrip('/')}/{shard.path}"
        dataset = tf.data.TFRecordDataset(path, compression_type=compression).batch(_BATCH)
        index = 0
        for batch in dataset.as_numpy_iterator():
            records = list(batch)
            yield records, [(shard.path, index + i) for i in range(len(records))]
            index += len(records)


def _storage(first: Manifest, second: Manifest) -> str:
    parts = []
    if first.compression != second.compression:
        parts.append(f"compression {first.compression} against {second.compression}")
    if len(first.shards) != len(second.shards):
        parts.append(f"{count_of(len(first.shards), 'shard')} against {len(second.shards)}")
    if [s.bytes for s in first.shards] != [s.bytes for s in second.shards]:
        parts.append(f"{first.total_bytes:,} bytes against {second.total_bytes:,}")
    return ", ".join(parts) or (
        "the same layout, other bytes (the same values encoded differently, e.g. by an earlier "
        "version with another order of features inside the Examples)"
    )
