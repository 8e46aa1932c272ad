"""`make_dataset`: a converted dataset's shards as a batched, parsed `tf.data.Dataset`.

One fixed order of steps, the order the tf.data performance guide recommends:
manifest shards -> this input pipeline's shards (or record ranges) -> seeded file shuffle ->
parallel interleave of count-checked blocks of records -> [cache] -> [shuffle of blocks ->
windows of records, each permuted at once] -> [repeat] -> batch -> batched
`tf.io.parse_example` -> [(features, label)] -> known cardinality -> prefetch(AUTOTUNE).

Records move in blocks and windows (string vectors), never one tf.data element per record: a
per-record shuffle buffer and unbatch/batch cost more than reading itself. Parsing after batching
lets one C++ call decode a whole batch, several times faster than parsing record by record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import numbers
import posixpath
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfdata_reader import partitions
from tfdata_reader.integrity import shard_problem
from tfdata_reader.manifest import (
    MANIFEST_NAME,
    Compression,
    FeatureSpec,
    Manifest,
    ManifestError,
)
from tfdata_reader.options import DEFAULT_CYCLE_LENGTH, ReadOptions
from tfdata_reader.order import Sharing, epoch_steps, stream_count, window_steps
from tfdata_reader.parsing import (
    fill_values,
    missing_label,
    parse_spec,
    parser,
    text_label_vocabulary,
    with_manifest_label,
)
from tfdata_reader.partitions import DatasetPath, Sources
from tfdata_reader.position import ReadPosition
from tfdata_reader.records import BlockReading, checked_blocks
from tfdata_reader.sharding import BY_FILE, FileRange, plan_reads
from tfdata_reader.streams import ShuffledReads, epoch_ordered, record_bytes

__all__ = [
    "ReadOptions",
    "check_batch_size",
    "fill_values",
    "make_dataset",
    "parse_spec",
    "read_manifest",
    "shard_paths",
    "steps_per_epoch",
]

_log = logging.getLogger(__name__)


def _manifest_path(path: str) -> str:
    return path if path.endswith(".json") else posixpath.join(path.rstrip("/"), MANIFEST_NAME)


def read_manifest(path: str) -> Manifest:
    """Reads a dataset's manifest with TensorFlow's file systems (local, gs://...).

    Args:
      path: the dataset directory, or its manifest.json.

    Raises:
      ManifestError: when the manifest is missing or malformed, naming its path.
    """
    manifest_path = _manifest_path(path)
    if not tf.io.gfile.exists(manifest_path):
        raise ManifestError(
            f"{manifest_path} does not exist: not a tfrecord-etl output, or its conversion did "
            "not finish (the manifest is written last)"
        )
    with tf.io.gfile.GFile(manifest_path, "rb") as f:
        return Manifest.from_json(f.read(), source=manifest_path)


def shard_paths(path: str, manifest: Manifest) -> list[str]:
    """Full paths of the manifest's shards, in manifest order."""
    base = posixpath.dirname(_manifest_path(path))
    return [posixpath.join(base, shard.path) for shard in manifest.shards]


def _select(manifest: Manifest, names: Sequence[str] | None) -> list[FeatureSpec]:
    if names is None:
        return list(manifest.features)
    known = {f.name for f in manifest.features}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"features {unknown} are not in the dataset; it has {sorted(known)}")
    return [manifest.feature(n) for n in names]


def _reads(manifest: Manifest, input_context: tf.distribute.InputContext | None) -> list[FileRange]:
    n = input_context.num_input_pipelines if input_context else 1
    i = input_context.input_pipeline_id if input_context else 0
    mode, ranges = plan_reads([s.records for s in manifest.shards], n, i)
    if n > 1:
        _log.info(
            "input pipeline %d of %d reads %s: %d records from %d of %d shards",
            i,
            n,
            "whole shards" if mode == BY_FILE else "a record range (fewer shards than pipelines)",
            sum(r.records for r in ranges),
            len(ranges),
            len(manifest.shards),
        )
    return ranges


def _without_corrupt_shards(
    ranges: list[FileRange], paths: list[str], manifest: Manifest
) -> list[FileRange]:
    problems = {}
    for index in sorted({r.shard_index for r in ranges}):
        problem = shard_problem(paths[index], manifest.shards[index])
        if problem:
            problems[index] = problem
    if problems:
        _log.warning(
            "skipping %d corrupt shard(s) (%d records): %s",
            len(problems),
            sum(r.records for r in ranges if r.shard_index in problems),
            "; ".join(f"{paths[i]}: {p}" for i, p in problems.items()),
        )
    return [r for r in ranges if r.shard_index not in problems]


def make_dataset(
    path: DatasetPath,
    batch_size: int,
    options: ReadOptions | None = None,
    *,
    input_context: tf.distribute.InputContext | None = None,
    position: ReadPosition | None = None,
    **overrides: Any,
) -> tf.data.Dataset:
    """Reads a converted dataset as batches of `{feature name: tensor}`.

    A dataset converted in shuffled order (the default) is read in the order of
    `tfdata_reader.order` when `shuffle` (the default): batches are random samples, each
    epoch's order is a function of the seed (default 0) and the epoch alone, a global step
    holds the same records on any number of input pipelines, and `position` resumes it. One
    in input order (`--order input`, or converted before 2026-12-06) is shuffled through a
    buffer of blocks, and a warning says its batches follow the input's order.

    Args:
      path: the dataset directory (holding manifest.json) or the manifest itself; local or gs://.
        Or several datasets read as one (daily partitions): a list of them, or a glob such as
        "gs://b/ds/2026-11-*" (see `tfdata_reader.partitions`).
      batch_size: records per batch (per replica when used under `tf.distribute`).
      options: how to read (`ReadOptions`); default `ReadOptions()`.
      input_context: from `tf.distribute`; this pipeline reads only its part of the records
        (of each global step; for a dataset in input order, whole shards when there are at
        least as many shards as pipelines, else a record range).
      position: a `ReadPosition` to start each iteration at (a shuffled dataset read with
        `shuffle`): the training loop moves it on (`position.callback()` for Keras), and a
        checkpoint saves it; the dataset's cardinality is then not asserted.
      **overrides: `ReadOptions` fields to change, e.g. `shuffle=False, seed=1`.

    Returns:
      A dataset of dicts (or `(dict, label)` with `label_key`), whose cardinality is known.
      Fixed-length features are dense tensors `[batch, *shape]`; variable-length and nullable
      ones are `tf.RaggedTensor`s `[batch, None]` (a missing value is an empty row). Iterating
      raises `InvalidArgumentError` naming the shard when a shard holds fewer or more records
      than the manifest lists.

    Raises:
      ManifestError: when the manifest is missing or malformed.
      ValueError: for bad options, unknown feature names, or nothing to read.
    """
    check_batch_size("batch_size", batch_size)
    options = dataclasses.replace(options or ReadOptions(), **overrides)
    manifest, paths, parts = _shards_to_read(path, options)
    options = with_manifest_label(options, manifest)
    names = [f.name for f in manifest.features]
    if options.label_key is not None and options.label_key not in names:
        raise ValueError(
            f"label_key {options.label_key!r} is not a feature; the dataset has {names}"
        )
    selected = _select(manifest, options.parsed_features())
    spec = parse_spec(selected)
    fills = fill_values(selected, options)
    batches: int | None
    deterministic = options.element_order_deterministic
    epoch_order = manifest.order.shuffled and options.shuffle and not options.cache
    if parts is not None and parts.named.weights is not None and not epoch_order:
        unshuffled = parts.in_input_order
        raise ValueError(
            _NO_WEIGHTS + (f" ({', '.join(unshuffled)} in input order)" if unshuffled else "")
        )
    if epoch_order:
        reads = _shuffled_reads(path, manifest, paths, parts, batch_size, input_context, options)
        if position is not None:  # other datasets within the epoch: refused here already
            position.read_with(reads.names, reads.weights)
        ds, batches = epoch_ordered(reads, batch_size, options, position)
        # Batches leave in the epoch order (a step is the same records on every pipeline, a
        # position resumes it) unless `deterministic=False` is asked for.
        deterministic = options.deterministic is not False
    else:
        if position is not None or options.start_epoch or options.start_step:
            raise ValueError(_NO_POSITION)
        _note_input_order(path, manifest, options)
        ranges = _this_pipelines_ranges(path, manifest, paths, input_context, options)
        ds = _in_blocks(paths, ranges, manifest, options)
        ds = ds.rebatch(batch_size, drop_remainder=options.drop_remainder)
        batches = _batches(sum(r.records for r in ranges), batch_size, options)
    ds = ds.map(
        parser(
            spec,
            options,
            "image" in spec,
            text_label_vocabulary(manifest, options),
            missing_label(manifest, options),
            fills,
        ),
        num_parallel_calls=options.num_parallel_calls,
        deterministic=deterministic,
    )
    if batches is not None:
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    return _finish(ds, input_context)


_NO_POSITION = (
    "position=, start_epoch and start_step resume the epoch order of a dataset converted in "
    "shuffled order, read with shuffle=True and without cache"
)
_NO_WEIGHTS = (
    "datasets with weights are mixed in the epoch order: every one converted in shuffled "
    "order (not --order input), read with shuffle=True and without cache"
)
_noted: set[str] = set()


def _note_input_order(path: DatasetPath, manifest: Manifest, options: ReadOptions) -> None:
    """Says once per dataset that its batches follow the input's order although `shuffle`
    asks for random ones (a dataset in input order: `--order input`, or an older one)."""
    key = str(path)
    if not options.shuffle or manifest.order.shuffled or key in _noted:
        return
    _noted.add(key)
    _log.warning(
        "%s holds its records in the input's order (converted with --order input, or before "
        "shuffled order was the default): shuffle=True mixes them only within a buffer of "
        "about %d records, so batches follow the input's order (a file sorted by its label "
        "gives batches of few labels); convert it again without --order input for random "
        "batches, the same order on any number of workers, and resuming by ReadPosition",
        key,
        options.shuffle_buffer_size,
    )


def _in_blocks(
    paths: list[str], ranges: list[FileRange], manifest: Manifest, options: ReadOptions
) -> tf.data.Dataset:
    """A dataset in input order (or read with shuffle=False or cache): blocks of records of
    this pipeline's shards, shuffled through a buffer and windows when asked, repeated."""
    ds = _files(paths, ranges, options)
    ds = _blocks(ds, ranges, manifest.compression, options)
    if options.cache:
        ds = ds.cache("" if options.cache is True else _cache_file(options, manifest, ranges))
    if options.shuffle:
        ds = _shuffle_blocks(ds, options)
    if options.num_epochs != 1:
        ds = ds.repeat(options.num_epochs)
    return ds


def _shuffled_reads(
    path: DatasetPath,
    manifest: Manifest,
    paths: list[str],
    parts: _Parts | None,
    batch_size: int,
    input_context: tf.distribute.InputContext | None,
    options: ReadOptions,
) -> ShuffledReads:
    """What this pipeline reads of a shuffled dataset: every shard (less corrupt ones, which
    every pipeline checks alike, so that all agree on the order) and how steps are shared."""
    if input_context is None:
        input_context = tf.distribute.InputContext()
    # Every input pipeline feeds one replica at least (a context made by hand may say less).
    replicas = max(input_context.num_replicas_in_sync, input_context.num_input_pipelines)
    global_batch = batch_size * replicas
    streams = options.streams or stream_count(global_batch)
    if global_batch % streams:
        raise ValueError(
            f"streams={streams} must divide the global batch ({global_batch} records: "
            f"{batch_size} a replica, {replicas} replicas)"
        )
    sharing = Sharing(
        global_batch,
        streams,
        input_context.num_input_pipelines,
        input_context.input_pipeline_id,
        options.drop_remainder,
    )
    keep = list(range(len(manifest.shards)))
    if options.skip_corrupt_shards:
        every = [FileRange(i, 0, s.records, s.records) for i, s in enumerate(manifest.shards)]
        keep = sorted({r.shard_index for r in _without_corrupt_shards(every, paths, manifest)})
    if not sum(manifest.shards[i].records for i in keep):
        raise ValueError(
            f"the reader has no records to read: {path} holds {manifest.total_records} records "
            f"in {len(manifest.shards)} shards"
            + (" and its corrupt shards were skipped" if options.skip_corrupt_shards else "")
        )
    seed = 0 if options.seed is None else options.seed
    if sharing.num_pipelines > 1:
        _log.info(
            "input pipeline %d of %d reads its part of each global step of %d records (%d "
            "streams of %d shards, seed %d)",
            sharing.pipeline, sharing.num_pipelines, global_batch, streams, len(keep), seed,
        )  # fmt: skip
    shards = tuple(manifest.shards[i] for i in keep)
    steps = epoch_steps(sum(s.records for s in shards), global_batch, options.drop_remainder)
    window = window_steps(global_batch, record_bytes(shards), options.reshuffle_bytes, steps)
    try:
        found = None if parts is None else _sources(parts, manifest, keep, streams)
    except ValueError as e:
        if not options.skip_corrupt_shards:
            raise
        raise ValueError(f"{e} (skip_corrupt_shards left out its corrupt shards)") from None
    return ShuffledReads(
        tuple(paths[i] for i in keep),
        shards,
        manifest.compression,
        seed,
        sharing,
        window,
        None if found is None else found.shards,
        None if found is None else found.weights,
        names=(partitions.location(str(path)),) if found is None else found.names,
    )


def _sources(parts: _Parts, manifest: Manifest, keep: list[int], streams: int) -> Sources:
    """The epoch's sources of several datasets (`partitions.sources`), of the shards kept."""
    ends = np.cumsum(parts.shards).tolist()
    records: list[list[int]] = [[] for _ in parts.shards]
    for index in keep:
        records[int(np.searchsorted(ends, index, side="right"))].append(
            manifest.shards[index].records
        )
    return partitions.sources(parts.named, records, streams)


def steps_per_epoch(
    path: DatasetPath,
    global_batch_size: int,
    split: str | None = None,
    drop_remainder: bool = False,
) -> int:
    """Global steps of one epoch of a dataset (for `ReadPosition`, or Keras' steps_per_epoch)."""
    check_batch_size("global_batch_size", global_batch_size)
    manifest, _, _ = _shards_to_read(path, ReadOptions(split=split))
    return epoch_steps(manifest.total_records, global_batch_size, drop_remainder)


def check_batch_size(name: str, value: Any) -> None:
    """A batch size is a whole number of at least 1 (a ValueError naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def _cache_file(options: ReadOptions, manifest: Manifest, ranges: Sequence[FileRange]) -> str:
    """The cache file for what this pipeline reads: the `cache` prefix and a digest of the
    dataset's fingerprint, the records read and the file order's seed. A new conversion into
    the same folder (even one with as many records), another split or another part never
    reads an older cache: TensorFlow's file cache would return whatever it holds."""
    key = {
        "fingerprint": manifest.fingerprint,
        "ranges": [[r.shard_index, r.start, r.stop] for r in ranges],
        "seed": options.seed if options.shuffle else None,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{options.cache}.{digest[:16]}"


@dataclasses.dataclass(frozen=True)
class _Parts:
    """Several datasets read as one: the sources as named (each with the partitions that hold
    a manifest) and each partition's shards in the merged manifest."""

    named: partitions.Named
    shards: tuple[int, ...]
    in_input_order: tuple[str, ...] = ()  # partitions converted with --order input


def _shards_to_read(
    path: DatasetPath, options: ReadOptions
) -> tuple[Manifest, list[str], _Parts | None]:
    """The manifest (of one split, with `split`; the union of several datasets when `path`
    names several), its shards' full paths, and how several divide (None for one)."""
    if partitions.is_several(path):
        named = partitions.named_datasets(path, tf.io.gfile.glob)
        groups = [named.folders] if named.weights is None else [[f] for f in named.folders]
        found: list[tuple[str, Manifest]] = []
        kept: list[tuple[str, ...]] = []
        for group in groups:  # a list's partitions together: those without a manifest left out
            read = partitions.read_partitions(
                [f for folders in group for f in folders],
                read_manifest,
                lambda folder: tf.io.gfile.exists(_manifest_path(folder)),
                options.strict,
            )
            found += read
            kept += (
                [(folder,) for folder, _ in read]
                if named.weights is None
                else [tuple(folder for folder, _ in read)]
            )
        names = tuple(k[0] for k in kept) if named.weights is None else named.names
        named = partitions.Named(names, tuple(kept), named.weights)
        narrowed = []
        for folder, manifest in found:
            try:
                narrowed.append((folder, manifest.split(options.split)))
            except ValueError as e:
                raise ValueError(f"{folder}: {e}") from None
        manifest = partitions.merge(narrowed, options.parsed_features())
        paths = [p for folder, part in narrowed for p in shard_paths(folder, part)]
        parts = _Parts(
            named,
            tuple(len(part.shards) for _, part in narrowed),
            tuple(folder for folder, part in narrowed if not part.order.shuffled),
        )
    else:
        assert isinstance(path, str)  # is_several: a list, a glob or a mapping
        manifest = read_manifest(path).split(options.split)
        paths = shard_paths(path, manifest)
        parts = None
    if options.decode_images and "image" not in {f.name for f in manifest.features}:
        raise ValueError("decode_images=True needs an 'image' feature (a --format images dataset)")
    return manifest, paths, parts


def _this_pipelines_ranges(
    path: DatasetPath,
    manifest: Manifest,
    paths: list[str],
    input_context: tf.distribute.InputContext | None,
    options: ReadOptions,
) -> list[FileRange]:
    """The record ranges this input pipeline reads, less corrupt shards when asked."""
    ranges = _reads(manifest, input_context)
    if options.skip_corrupt_shards:
        ranges = _without_corrupt_shards(ranges, paths, manifest)
    if not ranges:
        who = (
            f"input pipeline {input_context.input_pipeline_id} of "
            f"{input_context.num_input_pipelines}"
            if input_context
            else "the reader"
        )
        raise ValueError(
            f"{who} has no records to read: {path} holds "
            f"{manifest.total_records} records in {len(manifest.shards)} shards"
            + (" and its corrupt shards were skipped" if options.skip_corrupt_shards else "")
        )
    return ranges


def _files(paths: list[str], ranges: list[FileRange], options: ReadOptions) -> tf.data.Dataset:
    """One element per range to read (path, start, stop, shard records), seeded shuffle."""
    ds = tf.data.Dataset.from_tensor_slices(
        (
            [paths[r.shard_index] for r in ranges],
            tf.constant([r.start for r in ranges], tf.int64),
            tf.constant([r.stop for r in ranges], tf.int64),
            tf.constant([r.shard_records for r in ranges], tf.int64),
        )
    )
    if options.shuffle:
        ds = ds.shuffle(len(ranges), seed=options.seed, reshuffle_each_iteration=True)
    return ds


def _blocks(
    ds: tf.data.Dataset, ranges: list[FileRange], compression: Compression, options: ReadOptions
) -> tf.data.Dataset:
    """Count-checked blocks of records, read from several shards at once."""
    compression_type = compression.tf_name
    return ds.interleave(
        lambda p, start, stop, total: checked_blocks(
            p, start, stop, total, BlockReading(compression_type, options.block_length)
        ),
        cycle_length=options.cycle_length or min(DEFAULT_CYCLE_LENGTH, len(ranges)),
        num_parallel_calls=options.num_parallel_calls,
        deterministic=options.element_order_deterministic,
    )


def _finish(
    ds: tf.data.Dataset, input_context: tf.distribute.InputContext | None
) -> tf.data.Dataset:
    options = tf.data.Options()
    if input_context is not None:
        # We shard by file ourselves; TF's auto-sharding would shard again (and warn).
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    # The epoch order's plan (a NumPy function) and its epoch counter are state outside the
    # iterator: a checkpointed iterator keeps its place without them (the plan is a function
    # of the epoch it already holds).
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def _batches(records: int, batch_size: int, options: ReadOptions) -> int:
    if options.num_epochs is None:
        return tf.data.INFINITE_CARDINALITY
    total = records * options.num_epochs
    return total // batch_size if options.drop_remainder else -(-total // batch_size)


def _shuffle_blocks(ds: tf.data.Dataset, options: ReadOptions) -> tf.data.Dataset:
    """Shuffles blocks through a buffer, then permutes each window of records in one op.

    The window permutation is stateless, keyed by the seed and the window's index, so a
    checkpointed iterator resumes with exactly the order it would have had.
    """
    seed = options.seed
    ds = ds.shuffle(max(1, options.shuffle_buffer_size // options.block_length), seed=seed)
    key = seed if seed is not None else random.SystemRandom().randrange(1 << 62)
    return (
        ds.rebatch(options.shuffle_window)
        .enumerate()
        .map(
            lambda index, records: tf.random.experimental.stateless_shuffle(
                records, seed=tf.stack([tf.constant(key, tf.int64), index])
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    )
