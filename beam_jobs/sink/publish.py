"""Publishing written shards: final shard names, then `manifest.json`, written last.

`PublishShards` is the one publish path of both `ConvertToShards` and `WriteShards`: the
shards written under temporary names are gathered in one place, checked (every planned index
present, bad rows within `--max_bad_fraction`), and published.

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

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.errors import TooManyBadRecords, raised_for_launcher
from beam_jobs.sink.dead_letter import DEAD_LETTER_DIR, dead_letter_name
from beam_jobs.sink.output_dir import remove_folder
from beam_jobs.version import __version__
from tfdata_reader.manifest import (
    MANIFEST_NAME,
    FeatureSpec,
    Manifest,
    ShardInfo,
    shard_prefix_of,
)

__all__ = ["PublishShards", "PublishSpec", "WrittenShard", "build_manifest", "publish"]

TOOL_NAME = "tfrecord-etl"


@dataclasses.dataclass(frozen=True)
class WrittenShard:
    """A shard written under its temporary path, with what it holds."""

    index: int
    temp_path: str
    name: str
    records: int
    bytes: int
    crc32c: str
    input_bytes: int
    null_counts: dict[str, int]
    bad_records: int = 0
    dead_letter_temp_path: str | None = None  # JSON lines, one per bad row, when there are any
    split: str | None = None
    num_shards: int = 0


@dataclasses.dataclass(frozen=True)
class PublishSpec:
    """What publishing needs besides the written shards.

    Attributes:
      output: the output folder.
      temp_dir: the run's temporary folder, where the shards are; removed at the end.
      prefixes: the shard name prefixes (one per split), to find shards of earlier runs.
      max_bad_fraction: the largest share of bad rows that still publishes.
      compression: "none" or "gzip", as recorded in the manifest.
      inputs: the manifest's `inputs` section.
      options: the manifest's `options` section.
      features: the feature spec (None when it comes to `PublishShards` as a side input).
      splits: with splits, each split's name and weight, in order.
      label_vocabulary: label id -> name, for formats with a label vocabulary.
      tool_version: recorded in the manifest.
    """

    output: str
    temp_dir: str
    prefixes: tuple[str, ...]
    max_bad_fraction: float
    compression: str
    inputs: dict[str, Any]
    options: dict[str, Any]
    features: tuple[FeatureSpec, ...] | None = None
    splits: tuple[tuple[str, int], ...] = ()
    label_vocabulary: tuple[str, ...] = ()
    tool_version: str = __version__


def build_manifest(
    written: Sequence[WrittenShard], spec: PublishSpec, features: Sequence[FeatureSpec]
) -> Manifest:
    """The manifest for shards that were all written; features become nullable if any was null.

    Shards are listed split by split (in the splits' order), by index within a split.

    Raises:
      RuntimeError: when a shard index is missing or repeated (never publish a partial set).
    """
    splits = dict(spec.splits)
    order = {name: i for i, name in enumerate(splits)}
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
        compression=spec.compression,
        inputs=spec.inputs,
        options=spec.options,
        counts={
            "records_read": records + bad,
            "records_written": records,
            "bad_records": bad,
            "input_bytes_read": sum(w.input_bytes for w in written),
            "null_values": nulls,
        },
        dead_letter=[dead_letter_name(w.name) for w in ordered if w.dead_letter_temp_path],
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tool={"name": TOOL_NAME, "version": spec.tool_version},
        splits=splits,
        label_vocabulary=list(spec.label_vocabulary),
    )


def _publish_dead_letters(written: Sequence[WrittenShard], output: str) -> None:
    folder = FileSystems.join(output, DEAD_LETTER_DIR)
    remove_folder(folder)  # an earlier run's; ours replaces it whole
    moves = [(w.dead_letter_temp_path, dead_letter_name(w.name)) for w in written]
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
            output=output,
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
    spec: PublishSpec,
    features: Sequence[FeatureSpec] | None = None,
) -> Manifest:
    """Renames the shards into `spec.output` and writes `manifest.json` last.

    Args:
      written: every shard of the plan, written under temporary paths.
      spec: where and how to publish.
      features: the feature spec when `spec.features` is None.

    Raises:
      TooManyBadRecords: after publishing the dead letters alone.
    """
    features = spec.features if spec.features is not None else features
    manifest = build_manifest(written, spec, features or ())
    output = spec.output
    try:
        _check_bad_fraction(written, output, spec.max_bad_fraction)
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
    stale = _stale_shards(output, spec.prefixes, {s.path for s in manifest.shards})
    if stale:
        FileSystems.delete(stale)
    remove_folder(spec.temp_dir)
    return manifest


def _publish_in_worker(
    written: Sequence[WrittenShard],
    spec: PublishSpec,
    features: Sequence[FeatureSpec] | None = None,
) -> Manifest:
    with raised_for_launcher():
        return publish(written, spec, features)


class PublishShards(beam.PTransform):
    """Written shards (`WrittenShard`s) -> the published `Manifest`, a single element.

    Args:
      spec: where and how to publish.
      features: a side input with the feature spec, when `spec.features` is None (the spec is
        inferred inside the pipeline).
    """

    def __init__(self, spec: PublishSpec, features: Any = None) -> None:
        super().__init__()
        if spec.features is None and features is None:
            raise ValueError("PublishShards needs the features in its spec or as a side input")
        self._spec = spec
        self._features = features

    def expand(self, written: beam.PCollection) -> beam.PCollection:
        return (
            written
            # Publishing needs every shard at once: one list, on one worker.
            | "GatherShards" >> beam.combiners.ToList()
            | "Publish" >> beam.Map(_publish_in_worker, spec=self._spec, features=self._features)
        )
