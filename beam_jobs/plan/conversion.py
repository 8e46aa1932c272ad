"""Builds the conversion plan at pipeline construction time, from input metadata and samples.

Lists the inputs (Beam `FileSystems`, so local paths and gs:// work alike), prepares the input
format (which may read a little of the files: a CSV delimiter, a labels CSV), asks it where
each file may be cut, reads the head of a few files, infers the feature spec, measures how many
output bytes one input byte becomes (`measure`), and cuts the inputs into shards, per split
with --splits. Only the sampled heads are read; the cost does not grow with the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.errors import DataError, UsageError
from beam_jobs.core.inputs import InputFile
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.splits import Split
from beam_jobs.core.tasks import MIN_BATCH_ROWS, PlannedShard, WriteTask
from beam_jobs.formats.base import InputFormat
from beam_jobs.formats.registry import FORMATS
from beam_jobs.formats.zip_members import is_archive, list_members
from beam_jobs.plan.inputs import list_inputs
from beam_jobs.plan.measure import measure
from beam_jobs.plan.shards import (
    choose_num_shards,
    first_pass_tasks,
    plan_split_tasks,
    plan_tasks,
)
from beam_jobs.plan.shuffle import ShufflePlan, plan_shuffle
from beam_jobs.schema.projection import Projection
from beam_jobs.schema.split_hash import SplitRule
from beam_jobs.schema.tfmd import schema_from_pbtxt
from tfdata_reader.manifest import FeatureSpec, ManifestError, RecordOrder, schema_from_json

__all__ = ["MAX_SAMPLED_FILES", "ConversionPlan", "make_plan"]

MAX_SAMPLED_FILES = 8


@dataclasses.dataclass(frozen=True)
class ConversionPlan:
    """What a conversion will do, decided before any worker starts."""

    files: tuple[InputFile, ...]
    features: tuple[FeatureSpec, ...]  # the output's (what the manifest lists)
    shards: tuple[PlannedShard, ...]
    # What the writers do: one element per write task. Without splits a task per shard (a few
    # for a shard of many files, each writing a part); with splits each reads its stretch of
    # the input once and writes a part of one shard per split.
    tasks: tuple[WriteTask, ...]
    output_bytes_per_input_byte: float
    records_per_input_byte: float
    input_format: InputFormat
    splits: tuple[Split, ...] = ()
    split_shares: tuple[float, ...] = ()  # each split's sampled share of the output bytes
    read_features: tuple[FeatureSpec, ...] = ()  # the inputs' columns, as the readers parse them
    projection: Projection = Projection()
    # What the run was planned for: the shards' size or count, compression and names, the
    # --split_key, the largest record (--max_record_bytes) and the --label. After planning,
    # these come from the plan, never from the config again.
    sharding: ShardingOptions = ShardingOptions()
    split_key: str | None = None
    max_record_bytes: int | None = None
    label: str | None = None
    # Sampled rows that would go to the dead letter: how many, and the first few as
    # `file: reason` (a plan of 0 records says why).
    sampled_bad_rows: int = 0
    sampled_bad_examples: tuple[str, ...] = ()
    framed_bytes_per_input_byte: float = 0.0  # the records' bytes before compression
    # A shuffled conversion (`--order shuffled`, the default): the buckets the records cross
    # through on their way to the shards (`plan.shuffle`); None keeps the input order.
    shuffle: ShufflePlan | None = None

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def requested_shards(self) -> int | None:
        """--num_shards: a count forced per split (None: sized by the target)."""
        return self.sharding.num_shards

    @property
    def split_rule(self) -> SplitRule | None:
        """Which split each record goes to (None without --splits)."""
        return SplitRule(self.splits, self.split_key) if self.splits else None

    @property
    def estimated_output_bytes(self) -> float:
        return self.input_bytes * self.output_bytes_per_input_byte

    @property
    def estimated_records(self) -> float:
        return self.input_bytes * self.records_per_input_byte

    @property
    def per_column_bound(self) -> bool:
        """Whether the writers' time goes mostly to per-column work: more features than a
        batch holds rows (a task's rows, up to MIN_BATCH_ROWS). Each column of
        each batch costs NumPy and Arrow calls that hold Python's interpreter lock for a
        moment; threads of one process then mostly wait for each other (5,000 columns: two
        threads took 2.5 s a task where one alone took 0.9 s)."""
        rows_per_task = self.estimated_records / max(1, len(self.tasks))
        return len(self.features) > min(MIN_BATCH_ROWS, rows_per_task)

    def files_json(self) -> list[dict[str, Any]]:
        """The input files as the manifest records them, and rerun detection compares: path,
        size and modification time (a file edited in place is a new input)."""
        return [{"path": f.path, "bytes": f.size, "modified": f.modified} for f in self.files]

    @property
    def writes_parts(self) -> bool:
        """Whether some shard is written in parts by several tasks (joined after writing)."""
        return not all(task.whole_shard for task in self.tasks)

    def shards_per_split(self) -> dict[str | None, int]:
        """Planned shards of each split (None: the only key without splits), in split order."""
        counts: dict[str | None, int] = {s.name: 0 for s in self.splits} or {None: 0}
        for shard in self.shards:
            counts[shard.split] += 1
        return counts


def _spread(files: Sequence[InputFile], count: int) -> list[InputFile]:
    """Up to `count` files evenly spaced through the list, always including the first."""
    if len(files) <= count:
        return list(files)
    return [files[i * (len(files) - 1) // (count - 1)] for i in range(count)]


def _load_schema(path: str | None) -> list[FeatureSpec]:
    if path is None:
        return []
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"--schema {path}: cannot be read: {e}") from None
    try:
        if path.endswith(".json") or text.lstrip()[:1] in (b"{", b"["):
            return schema_from_json(text, source=path)
        return schema_from_pbtxt(text, source=path)  # TFX's format (TFDV, schema.pbtxt)
    except ManifestError as e:  # the user's file: a usage error (exit 2), like an unreadable one
        raise UsageError(f"--schema {e}") from None


def _check_split_key(config: ConvertConfig, features: Sequence[FeatureSpec]) -> None:
    names = [f.name for f in features]
    if config.split_key and config.split_key not in names:
        raise UsageError(f"--split_key {config.split_key!r} is not a feature; features: {names}")


def _check_label(config: ConvertConfig, features: Sequence[FeatureSpec]) -> None:
    by_name = {f.name: f for f in features}
    if config.label is None:
        return
    label = by_name.get(config.label)
    if label is None:
        raise UsageError(f"--label {config.label!r} is not a feature; features: {list(by_name)}")
    if label.shape != [] or label.dtype == "float32":
        raise UsageError(
            f"--label {config.label!r} must hold one integer or text value per record; it is "
            f"{label.dtype} with shape {label.shape}"
        )


def _opened(files: Sequence[InputFile], kind: type[InputFormat]) -> list[InputFile]:
    """The inputs with each ZIP archive replaced by its members (`zip_members`)."""
    archives = [f.path for f in files if is_archive(f.path)]
    if archives and not kind.reads_archives:
        readers = ", ".join(n for n, f in FORMATS.items() if f.reads_archives)
        raise UsageError(
            f"{archives[0]}: a ZIP archive; its members are read as {readers} inputs, not "
            f"{kind.name}: unzip it first"
        )
    return [m for f in files for m in (list_members(f) if is_archive(f.path) else [f])]


def _refuse_empty(files: Sequence[InputFile], input_format: type[InputFormat]) -> None:
    empty = [f.path for f in files if f.size == 0]
    if empty and input_format.name != "images":  # an empty image is dead-lettered instead
        # A 0-byte input is usually an upstream export that failed.
        raise DataError(
            f"{len(empty)} input file(s) are empty (0 bytes): "
            f"{', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''}; remove them from --input"
        )


def make_plan(config: ConvertConfig) -> ConversionPlan:
    """Lists, samples and plans a conversion.

    Raises:
      UsageError: for inputs that match nothing or a --split_key that is not a feature.
      DataError: for an empty input file or a sampled file that is not of the format.
    """
    kind = FORMATS[config.format]
    files = kind.select(_opened(list_inputs(config.inputs, exclude=config.output or None), kind))
    _refuse_empty(files, kind)
    input_format = kind.prepare(files, config.read_settings())
    sharding = config.sharding
    files = input_format.with_cuts(files, sharding.target_shard_bytes)
    spread = _spread(files, MAX_SAMPLED_FILES)
    samples = [input_format.sample(f, config.sample_bytes) for f in spread]
    read_features = input_format.infer_features(samples, _load_schema(config.schema))
    projection = config.projection
    features = projection.features(read_features)
    _check_split_key(config, features)
    _check_label(config, features)
    bad: list[BadRow] = []
    measured = measure(
        input_format,
        samples,
        read_features,
        projection,
        sharding,
        bad.append,
        SplitRule(config.splits, config.split_key) if config.splits else None,
    )
    input_bytes = sum(f.size for f in files)

    def shard_count(share: float) -> int:
        return choose_num_shards(
            input_bytes * measured.output_bytes_per_input_byte * share,
            sharding.target_shard_bytes,
            max(1.0, input_bytes * measured.records_per_input_byte * share),
            sharding.num_shards,
        )

    shares: dict[str | None, float]
    if config.splits:
        counts = [
            (split.name, shard_count(share))
            for split, share in zip(config.splits, measured.split_shares, strict=True)
        ]
        shards, tasks = plan_split_tasks(files, counts)
        shares = dict(zip([s.name for s in config.splits], measured.split_shares, strict=True))
    else:
        shards, tasks = plan_tasks(files, shard_count(1.0))
        shares = {None: 1.0}
    shuffle = None
    if sharding.order is RecordOrder.SHUFFLED:
        framed = input_bytes * measured.framed_bytes_per_input_byte
        split_shards: dict[str | None, int] = {}
        for shard in shards:  # the counts planned, less ranges left empty at file cuts
            split_shards[shard.split] = split_shards.get(shard.split, 0) + 1
        shuffle = plan_shuffle(
            split_shards,
            {split: framed * shares[split] for split in split_shards},
            sharding.shuffle_seed,
        )
        tasks = first_pass_tasks(files, split_shards, tasks)
    return ConversionPlan(
        files=tuple(files),
        features=tuple(features),
        shards=tuple(shards),
        tasks=tuple(tasks),
        output_bytes_per_input_byte=measured.output_bytes_per_input_byte,
        records_per_input_byte=measured.records_per_input_byte,
        input_format=input_format,
        splits=config.splits,
        split_shares=measured.split_shares,
        read_features=tuple(read_features),
        projection=projection,
        sharding=sharding,
        split_key=config.split_key,
        max_record_bytes=config.max_record_bytes,
        label=config.label,
        sampled_bad_rows=len(bad),
        sampled_bad_examples=tuple(f"{b.path}: {b.reason}" for b in bad[:3]),
        framed_bytes_per_input_byte=measured.framed_bytes_per_input_byte,
        shuffle=shuffle,
    )
