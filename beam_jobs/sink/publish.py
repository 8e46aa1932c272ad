"""Publishing a finished conversion: final shard names, then `manifest.json`, written last.

Order matters. The old manifest (if any) goes first, so no manifest ever lists a shard that is
being replaced; then temporary shards get their final names; then the new manifest is written
under a temporary name and renamed, so readers see either no manifest or a complete one; last,
leftovers (our temporary folder, shards of an earlier run with another count) are removed.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.errors import DataError
from beam_jobs.sink.output_dir import DEAD_LETTER_DIR, remove_folder
from beam_jobs.sink.shard_writer import WrittenShard
from tfdata_reader.manifest import (
    MANIFEST_NAME,
    FeatureSpec,
    Manifest,
    ShardInfo,
    shard_prefix_of,
)

__all__ = [
    "TOOL_NAME",
    "TooManyBadRecords",
    "build_manifest",
    "dead_letter_name",
    "publish",
    "write_text_atomically",
]

TOOL_NAME = "tfrecord-etl"


def build_manifest(
    written: Sequence[WrittenShard],
    features: Sequence[FeatureSpec],
    compression: str,
    inputs: dict[str, Any],
    options: dict[str, Any],
    tool_version: str,
    splits: dict[str, int] | None = None,
    extras: dict[str, Any] | None = None,
) -> Manifest:
    """The manifest for shards that were all written; features become nullable if any was null.

    Args:
      splits: with --splits, each split's weight, in order; shards are listed split by split.
      extras: format-specific entries (`label_vocabulary`).

    Raises:
      RuntimeError: when a shard index is missing or repeated (never publish a partial set).
    """
    order = {name: i for i, name in enumerate(splits or {})}
    ordered = sorted(written, key=lambda w: (order.get(w.split, -1), w.index))
    for split in splits or [None]:
        indexes = [w.index for w in ordered if w.split == split]
        expected = list(range(max((w.num_shards for w in ordered if w.split == split), default=0)))
        if indexes != expected:
            raise RuntimeError(
                f"refusing to publish: shard indexes {indexes} of split {split} are not {expected}"
            )
    nulls = {f.name: sum(w.null_counts.get(f.name, 0) for w in written) for f in features}
    records = sum(w.records for w in written)
    bad = sum(w.bad_records for w in written)
    return Manifest(
        shards=[ShardInfo(w.name, w.records, w.bytes, w.crc32c, w.split) for w in ordered],
        features=[
            dataclasses.replace(f, nullable=f.nullable or nulls[f.name] > 0) for f in features
        ],
        compression=compression,
        inputs=inputs,
        options=options,
        counts={
            "records_read": records + bad,
            "records_written": records,
            "bad_records": bad,
            "input_bytes_read": sum(w.input_bytes for w in written),
            "null_values": nulls,
        },
        dead_letter=[dead_letter_name(w) for w in ordered if w.dead_letter_temp_path],
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tool={"name": TOOL_NAME, "version": tool_version},
        splits=dict(splits or {}),
        label_vocabulary=list((extras or {}).get("label_vocabulary", [])),
    )


class TooManyBadRecords(DataError):
    """More rows than `--max_bad_fraction` allows could not be converted; their dead letter is
    published under `output` (when known: runners pass on only the message)."""

    def __init__(self, message: str, output: str | None = None) -> None:
        super().__init__(message)
        self.output = output


def dead_letter_name(shard: WrittenShard) -> str:
    """Where a shard's bad rows are published, relative to the output directory."""
    return f"{DEAD_LETTER_DIR}/{shard.name}.jsonl"


def _publish_dead_letters(written: Sequence[WrittenShard], output: str) -> None:
    folder = FileSystems.join(output, DEAD_LETTER_DIR)
    remove_folder(folder)  # an earlier run's; ours replaces it whole
    moves = [(w.dead_letter_temp_path, dead_letter_name(w)) for w in written]
    moves = [(src, FileSystems.join(output, dst)) for src, dst in moves if src]
    if moves:
        FileSystems.mkdirs(folder)
        FileSystems.rename([src for src, _ in moves], [dst for _, dst in moves])


def _check_bad_fraction(written: Sequence[WrittenShard], output: str, limit: float) -> None:
    bad = sum(w.bad_records for w in written)
    total = bad + sum(w.records for w in written)
    if total and bad / total > limit:
        raise TooManyBadRecords(
            f"{bad:,} of {total:,} records ({bad / total:.3%}) could not be converted, more than "
            f"--max_bad_fraction {limit} allows; they are listed with their reasons in "
            f"{FileSystems.join(output, DEAD_LETTER_DIR)}/; no manifest was published",
            output,
        )


def write_text_atomically(path: str, text: str) -> None:
    """Writes a file under a temporary name beside it, then renames it into place."""
    temp = f"{path}.tmp-{datetime.datetime.now().strftime('%Y%m%d%H%M%S%f')}"
    with FileSystems.create(temp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(text.encode("utf-8"))
    FileSystems.rename([temp], [path])


def _stale_shards(output: str, prefixes: Sequence[str], keep: set[str]) -> list[str]:
    patterns = [FileSystems.join(output, f"{prefix}-*") for prefix in prefixes]
    found = [m for result in FileSystems.match(patterns) for m in result.metadata_list]
    names = {m.path: m.path.rstrip("/").rsplit("/", 1)[-1] for m in found}
    return sorted(
        path
        for path, name in names.items()
        if shard_prefix_of(name) in prefixes and name not in keep
    )


def publish(
    written: Sequence[WrittenShard],
    output: str,
    temp_dir: str,
    prefixes: Sequence[str],
    max_bad_fraction: float,
    **manifest_fields: Any,
) -> Manifest:
    """Renames the shards into `output` and writes `manifest.json` last.

    Args:
      written: every shard of the plan, written under temporary paths.
      output: the output directory.
      temp_dir: the temporary folder the shards are in; removed at the end.
      prefixes: the shard name prefixes (one per split), to find shards of earlier runs.
      max_bad_fraction: the largest share of bad rows that still publishes.
      **manifest_fields: the other arguments of `build_manifest`.

    Raises:
      TooManyBadRecords: after publishing the dead letters alone.
    """
    manifest = build_manifest(written, **manifest_fields)
    try:
        _check_bad_fraction(written, output, max_bad_fraction)
    except TooManyBadRecords:
        _publish_dead_letters(written, output)
        raise
    manifest_path = FileSystems.join(output, MANIFEST_NAME)
    if FileSystems.exists(manifest_path):
        FileSystems.delete([manifest_path])
    FileSystems.rename(
        [w.temp_path for w in written], [FileSystems.join(output, w.name) for w in written]
    )
    _publish_dead_letters(written, output)
    write_text_atomically(manifest_path, manifest.to_json())
    stale = _stale_shards(output, prefixes, {s.path for s in manifest.shards})
    if stale:
        FileSystems.delete(stale)
    remove_folder(temp_dir)
    return manifest
