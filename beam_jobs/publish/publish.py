"""Publishing written shards: final shard names, then `manifest.json`, written last.

`PublishShards` is the one publish path of both `ConvertToShards` and `WriteShards`: the
shards written under temporary names are gathered in one place, checked (every planned index
present, bad rows within `--max_bad_fraction`), and published.

The previous dataset stays readable until the new manifest replaces it, and a run that fails
never touches what the previous manifest lists: the new shards and dead letters get names no
current file has (the next *generation*, `data-00000-of-00007.g3.tfrecord`), then the new
manifest is written under a temporary name and renamed over the old one (an atomic replace
locally; on Cloud Storage the copy onto `manifest.json` replaces it at once), and only then are
the previous generation's files, failed runs' dead letters and the run's temporary folder
removed. Publishing checks that this run still holds the output's lease first, again after
merging the statistics (the slow part) and before naming anything, and once more before the
manifest; it ends by releasing the lease.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.bad_rows import DEAD_LETTER_DIR, dead_letter_name
from beam_jobs.core.compression import Compression
from beam_jobs.core.errors import ManifestError, TooManyBadRecords, raised_for_launcher
from beam_jobs.core.paths import is_local
from beam_jobs.core.splits import Split
from beam_jobs.core.tasks import WrittenShard
from beam_jobs.core.units import count_of, format_size
from beam_jobs.core.version import __version__
from beam_jobs.publish import journal
from beam_jobs.publish.checks import (
    check_bad_fraction,
    check_conservation,
    check_coverage,
    rows_read,
)
from beam_jobs.publish.companions import companion_entries, companion_files
from beam_jobs.publish.lease import check_holder
from beam_jobs.publish.output_dir import load_manifest
from beam_jobs.sink import progress
from tfdata_reader.manifest import (
    Counts,
    FeatureSpec,
    Manifest,
    Order,
    ShardInfo,
    shard_prefix_of,
    with_generation,
)

__all__ = ["PublishShards", "PublishSpec", "build_manifest", "publish"]

_log = logging.getLogger(__name__)

TOOL_NAME = "tfrecord-etl"


@dataclasses.dataclass(frozen=True)
class PublishSpec:
    """What publishing needs besides the written shards.

    Attributes:
      output: the output folder.
      temp_dir: the run's temporary folder, where the shards are; removed at the end.
      prefixes: the shard name prefixes (one per split), to find shards of earlier runs.
      max_bad_fraction: the largest share of bad rows that still publishes.
      compression: the shards', as recorded in the manifest.
      inputs: the manifest's `inputs` section.
      options: the manifest's `options` section.
      features: the feature spec (None when it comes to `PublishShards` as a side input).
      splits: with splits, each split's name and weight, in order.
      label_vocabulary: label id -> name, for formats with a label vocabulary.
      label: the label feature (`--label`), recorded for the reader.
      tool_version: recorded in the manifest.
      run_id: the run whose lease publishing checks and releases ("": none taken).
      order: the records' order, as the manifest records it.
    """

    output: str
    temp_dir: str
    prefixes: tuple[str, ...]
    max_bad_fraction: float
    compression: Compression
    inputs: dict[str, Any]
    options: dict[str, Any]
    features: tuple[FeatureSpec, ...] | None = None
    splits: tuple[Split, ...] = ()
    label_vocabulary: tuple[str, ...] = ()
    label: str | None = None
    tool_version: str = __version__
    run_id: str = ""  # the lease holder this publish must be; "" for WriteShards (no lease)
    order: Order = dataclasses.field(default_factory=Order)


def build_manifest(
    written: Sequence[WrittenShard],
    spec: PublishSpec,
    features: Sequence[FeatureSpec],
    generation: int = 0,
) -> Manifest:
    """The manifest for shards that were all written; features become nullable if any was null.

    Shards are listed split by split (in the splits' order), by index within a split, under
    their names in `generation`.

    Raises:
      RuntimeError: when a shard index is missing or repeated (never publish a partial set).
    """
    splits = {s.name: s.weight for s in spec.splits}
    order: dict[str | None, int] = {name: i for i, name in enumerate(splits)}
    ordered = sorted(written, key=lambda w: (order.get(w.split, -1), w.index))
    for split in splits or [None]:
        indexes = [w.index for w in ordered if w.split == split]
        expected = list(range(max((w.num_shards for w in ordered if w.split == split), default=0)))
        if indexes != expected:
            raise RuntimeError(
                f"refusing to publish: shard indexes {indexes} of split {split} are not {expected}"
            )
    tally = Counts.total(w.counts for w in written)
    nulls = {f.name: tally.missing_values.get(f.name, 0) for f in features}  # in spec order
    return Manifest(
        shards=[
            ShardInfo(
                with_generation(w.name, generation), w.records, w.bytes, w.crc32c, w.split, w.seek
            )
            for w in ordered
        ],
        features=[
            dataclasses.replace(
                f,
                nullable=f.nullable or nulls[f.name] > 0,
                null_values=_with_markers_seen(f.null_values, tally.markers_seen.get(f.name, {})),
            )
            for f in features
        ],
        compression=spec.compression,
        inputs=spec.inputs,
        options=spec.options,
        counts=dataclasses.replace(
            tally,
            records_read=rows_read(written),
            records_written=sum(w.records for w in written),
            missing_values=nulls,
        ),
        dead_letter=_dead_letter_names(ordered, generation),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tool={"name": TOOL_NAME, "version": spec.tool_version},
        splits=splits,
        label_vocabulary=list(spec.label_vocabulary) or _text_labels(written),
        label=spec.label,
        generation=generation,
        order=spec.order,
    )


def _with_markers_seen(listed: Sequence[str] | None, seen: dict[str, int]) -> list[str] | None:
    """A feature's missing-value markers and those its writers found besides (a one-token
    marker such as `nil` first seen after the sample), so that `--schema` reads the same. A
    marker seen with a digit is another spelling of a number marker (`-999.0` of `-999`),
    which the number itself covers."""
    found = [m for m in seen if m not in (listed or ()) and not any(c.isdigit() for c in m)]
    if not found:
        return None if listed is None else list(listed)
    return [*(listed or ()), *sorted(found)]


def _text_labels(written: Sequence[WrittenShard]) -> list[str]:
    """A text label's vocabulary: its distinct values, sorted (id = position)."""
    values = sorted({v for w in written for v in w.label_values})
    # Text values were checked to be UTF-8 when read (a value that is not is a bad row).
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]


def _dead_letter_names(written: Sequence[WrittenShard], generation: int) -> list[str]:
    return [
        dead_letter_name(with_generation(w.name, generation))
        for w in written
        if w.dead_letter_temp_path
    ]


def _dead_letter_moves(
    written: Sequence[WrittenShard], generation: int
) -> list[tuple[str, str, int]]:
    """(temporary file, name in the output, bytes) of each shard's dead letter (bytes: -1,
    not known before it is moved)."""
    return [
        (w.dead_letter_temp_path, dead_letter_name(with_generation(w.name, generation)), -1)
        for w in written
        if w.dead_letter_temp_path
    ]


def _publish_dead_letters(written: Sequence[WrittenShard], output: str, generation: int) -> None:
    """The dead letters alone, copied (a run over `--max_bad_fraction` publishes no manifest,
    and keeps its work for a rerun with a larger one)."""
    moves = _dead_letter_moves(written, generation)
    if moves:
        folder = FileSystems.join(output, DEAD_LETTER_DIR)
        if is_local(folder) and not FileSystems.exists(folder):
            FileSystems.mkdirs(folder)
        FileSystems.copy(
            [src for src, _, _ in moves], [FileSystems.join(output, dst) for _, dst, _ in moves]
        )


def _previous(output: str) -> Manifest | None:
    try:
        return load_manifest(output)
    except ManifestError:
        return None  # none, or unreadable: nothing it lists can be trusted to be ours


def publish(
    written: Sequence[WrittenShard],
    spec: PublishSpec,
    features: Sequence[FeatureSpec] | None = None,
) -> Manifest:
    """Names the shards into `spec.output` and writes `manifest.json` last.

    Args:
      written: every shard of the plan, written under temporary paths.
      spec: where and how to publish.
      features: the feature spec when `spec.features` is None.

    Raises:
      OutputBusy: when another run holds the output's lease.
      TooManyBadRecords: after publishing the dead letters alone (under new names).
    """
    started = time.monotonic()
    output = spec.output
    check_holder(output, spec.run_id)
    previous = _previous(output)
    generation = previous.generation + 1 if previous else 0
    features = spec.features if spec.features is not None else features
    check_conservation(written)
    manifest = build_manifest(written, spec, features or (), generation)
    check_coverage(written)
    try:
        dead_letters = _dead_letter_names(written, generation)
        check_bad_fraction(written, output, spec.max_bad_fraction, dead_letters)
    except TooManyBadRecords:
        _publish_dead_letters(written, output, generation)
        raise
    progress.write_stage_note(spec.temp_dir, "publish", f"merging the statistics of {len(written)}")
    files = companion_files(written, manifest)  # the statistics merged, before anything is named
    manifest = dataclasses.replace(manifest, companions=companion_entries(files))
    # The run's launcher may have been interrupted while this worker merged (it released the
    # lease): what follows is quick, and the manifest's write is checked once more.
    check_holder(output, spec.run_id)
    moves = [
        (w.temp_path, with_generation(w.name, generation), w.bytes) for w in written
    ] + _dead_letter_moves(written, generation)
    prefixes = set(spec.prefixes) | _prefixes(previous)
    progress.write_stage_note(spec.temp_dir, "publish", f"naming {count_of(len(written), 'shard')}")
    # Written down before anything is moved (`journal`): from here publishing is finished by
    # this worker, or by the next run when this one is killed; a signal lets it finish.
    done = journal.write(spec.temp_dir, moves, files, manifest, sorted(prefixes))
    journal.claim(spec.temp_dir, spec.run_id)  # unless the launcher stopped the run first
    check_holder(output, spec.run_id)
    journal.finish(output, spec.temp_dir, done, spec.run_id)
    # Publishing is one worker's work after all the writers': its share of a long run is shown.
    _log.info(
        "published %s and their statistics in %.1f s (manifest.json: %s)",
        count_of(len(written), "shard"), time.monotonic() - started,
        format_size(done.files[-1][1]),
    )  # fmt: skip
    return manifest


def _prefixes(manifest: Manifest | None) -> set[str]:
    """The shard prefixes an earlier manifest used (its files are provably ours)."""
    if manifest is None:
        return set()
    found = (shard_prefix_of(s.path.rsplit("/", 1)[-1]) for s in manifest.shards)
    return {prefix for prefix in found if prefix is not None}


def _publish_in_worker(
    written: Sequence[WrittenShard],
    spec: PublishSpec,
    features: Sequence[FeatureSpec] | None = None,
) -> Manifest:
    if not spec.run_id:  # a user's own pipeline: its errors stay as they are
        return publish(written, spec, features)
    with raised_for_launcher():  # our launcher's run: the error crosses to it by its marker
        return publish(written, spec, features)


def _publish_gathered(
    keyed: tuple[int, Iterable[WrittenShard]],
    spec: PublishSpec,
    features: Sequence[FeatureSpec] | None = None,
) -> Manifest:
    return _publish_in_worker(list(keyed[1]), spec, features)


class PublishShards(beam.PTransform[Any, Any]):
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

    def expand(self, written: beam.PCollection[Any]) -> beam.PCollection[Any]:
        return (
            written
            # Publishing needs every shard at once, on one worker: one key, grouped. Not
            # Beam's ToList, whose partial lists are pickled whole at each step (20,000 shards
            # peaked at 2.67 GB with it, 2.15 GB without), nor a combine with a default, which
            # is a side input that Beam's DaskRunner computes out of the launcher's reach.
            # There is always a shard.
            | "KeyAsOne" >> beam.Map(lambda shard: (0, shard))
            | "GatherShards" >> beam.GroupByKey()
            | "Publish" >> beam.Map(_publish_gathered, spec=self._spec, features=self._features)
        )
