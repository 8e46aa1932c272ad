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

import logging
import posixpath
import random
from collections.abc import Sequence

import tensorflow as tf

from tfdata_reader.integrity import shard_problem
from tfdata_reader.manifest import MANIFEST_NAME, FeatureSpec, Manifest, ManifestError
from tfdata_reader.records import checked_blocks
from tfdata_reader.sharding import BY_FILE, FileRange, plan_reads

__all__ = ["make_dataset", "parse_spec", "read_manifest", "shard_paths"]

_TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}
_log = logging.getLogger(__name__)
DEFAULT_CYCLE_LENGTH = 16
DEFAULT_SHUFFLE_BUFFER = 10_000
DEFAULT_BLOCK_LENGTH = 64
DEFAULT_SHUFFLE_WINDOW = 4096


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


def parse_spec(
    features: Sequence[FeatureSpec],
) -> dict[str, tf.io.FixedLenFeature | tf.io.RaggedFeature]:
    """`tf.io.parse_example` features: dense for fixed-length, ragged for the rest.

    A nullable feature is ragged even when it has one value per record, because a missing value
    is a record with zero values, which a dense tensor cannot show.
    """
    return {
        f.name: tf.io.FixedLenFeature(f.shape, _TF_DTYPES[f.dtype])
        if f.is_fixed
        else tf.io.RaggedFeature(_TF_DTYPES[f.dtype], row_splits_dtype=tf.int64)
        for f in features
    }


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
    path: str,
    batch_size: int,
    *,
    shuffle: bool = True,
    seed: int | None = None,
    num_epochs: int | None = 1,
    input_context: tf.distribute.InputContext | None = None,
    cycle_length: int | None = None,
    block_length: int = DEFAULT_BLOCK_LENGTH,
    num_parallel_calls: int = tf.data.AUTOTUNE,
    deterministic: bool | None = None,
    drop_remainder: bool = False,
    features: Sequence[str] | None = None,
    label_key: str | None = None,
    cache: bool | str | None = None,
    shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER,
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
    skip_corrupt_shards: bool = False,
    split: str | None = None,
    decode_images: bool = False,
    image_size: tuple[int, int] | None = None,
    image_channels: int = 3,
) -> tf.data.Dataset:
    """Reads a converted dataset as batches of `{feature name: tensor}`.

    Args:
      path: the dataset directory (holding manifest.json) or the manifest itself; local or gs://.
      batch_size: records per batch (per replica when used under `tf.distribute`).
      shuffle: shuffle the shard order, the blocks read (through a buffer of about
        `shuffle_buffer_size` records), and the records within each window of `shuffle_window`
        consecutive records (one permutation of the whole window at once).
      seed: seed for the shuffles; each epoch still gets a fresh order derived from it.
      num_epochs: passes over the data; None repeats forever.
      input_context: from `tf.distribute`; this pipeline reads only its part of the records
        (whole shards when there are at least as many shards as pipelines, else a record range).
      cycle_length: shards read in parallel (default min(16, shards read)).
      block_length: consecutive records taken from one shard before moving to the next
        (default 64: interleaving blocks is several times faster than single records).
      num_parallel_calls: parallelism of reading and parsing (default AUTOTUNE).
      deterministic: force (True) or relax (False) element order; None relaxes it when
        shuffling without a seed (the order is random anyway, and tf.data may then hand out
        whichever block or batch is ready first) and keeps tf.data's default otherwise.
      drop_remainder: drop a last batch smaller than `batch_size`.
      features: names of the features to parse (default all).
      label_key: return `(features, label)` tuples with this feature as the label, for Keras.
      cache: True to cache records in memory after the first epoch, or a file path prefix.
      shuffle_buffer_size: records held for shuffling, as blocks of `block_length`.
      shuffle_window: records permuted together after the block shuffle; a batch draws from
        about `shuffle_window / block_length` different blocks.
      skip_corrupt_shards: check this pipeline's shards against the manifest (size and CRC32C,
        one extra read) before reading, and leave out the bad ones with a logged warning that
        names each and says why, instead of failing when reading reaches them.
      split: read only this split of a dataset converted with `--splits` (e.g. "train").
      decode_images: decode the `image` feature (JPEG, PNG, GIF, BMP) into uint8 tensors of
        `image_channels` channels: a `tf.RaggedTensor` [batch, None, None, channels] of each
        image's own size, or dense [batch, height, width, channels] with `image_size`.
      image_size: (height, width) every decoded image is resized to (bilinear), so they batch
        densely.
      image_channels: channels of decoded images (1 grayscale, 3 RGB, 4 RGBA).

    Returns:
      A dataset of dicts (or `(dict, label)` with `label_key`), whose cardinality is known.
      Fixed-length features are dense tensors `[batch, *shape]`; variable-length and nullable
      ones are `tf.RaggedTensor`s `[batch, None]` (a missing value is an empty row). Iterating
      raises `InvalidArgumentError` naming the shard when a shard holds fewer or more records
      than the manifest lists.

    Raises:
      ManifestError: when the manifest is missing or malformed.
      ValueError: for bad arguments or unknown feature names.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if num_epochs is not None and num_epochs < 1:
        raise ValueError(f"num_epochs must be at least 1 or None (forever), got {num_epochs}")
    if deterministic is None and shuffle and seed is None:
        deterministic = False
    if image_size is not None and not decode_images:
        raise ValueError("image_size needs decode_images=True")
    manifest = read_manifest(path)
    paths = shard_paths(path, manifest)
    if split is not None:
        keep = [i for i, s in enumerate(manifest.shards) if s.split == split]
        manifest = manifest.split(split)
        paths = [paths[i] for i in keep]
    if decode_images and "image" not in {f.name for f in manifest.features}:
        raise ValueError("decode_images=True needs an 'image' feature (a --format images dataset)")
    selected = _select(manifest, features if label_key is None else _with(features, label_key))
    spec = parse_spec(selected)
    ranges = _reads(manifest, input_context)
    if skip_corrupt_shards:
        ranges = _without_corrupt_shards(ranges, paths, manifest)
    if not ranges:
        who = (
            f"input pipeline {input_context.input_pipeline_id} of "
            f"{input_context.num_input_pipelines}"
            if input_context
            else "the reader"
        )
        raise ValueError(
            f"{who} has no records to read: {path} holds {manifest.total_records} records in "
            f"{len(manifest.shards)} shards"
            + (" and its corrupt shards were skipped" if skip_corrupt_shards else "")
        )
    compression = "GZIP" if manifest.compression == "gzip" else ""

    ds = tf.data.Dataset.from_tensor_slices(
        (
            [paths[r.shard_index] for r in ranges],
            tf.constant([r.start for r in ranges], tf.int64),
            tf.constant([r.stop for r in ranges], tf.int64),
            tf.constant([r.shard_records for r in ranges], tf.int64),
        )
    )
    if shuffle:
        ds = ds.shuffle(len(ranges), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(
        lambda p, start, stop, total: checked_blocks(
            p, start, stop, total, compression, block_length
        ),
        cycle_length=cycle_length or min(DEFAULT_CYCLE_LENGTH, len(ranges)),
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )
    if cache:
        ds = ds.cache("" if cache is True else cache)
    if shuffle:
        ds = _shuffle_blocks(ds, shuffle_buffer_size, block_length, shuffle_window, seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)
    images = None
    if decode_images and any(f.name == "image" for f in selected):
        images = (image_size, image_channels)
    ds = ds.map(
        _parser(spec, label_key, images),
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )
    records = sum(r.records for r in ranges)
    ds = ds.apply(
        tf.data.experimental.assert_cardinality(
            _batches(records, batch_size, num_epochs, drop_remainder)
        )
    )
    options = tf.data.Options()
    if input_context is not None:
        # We shard by file ourselves; TF's auto-sharding would shard again (and warn).
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def _batches(records: int, batch_size: int, num_epochs: int | None, drop: bool) -> int:
    if num_epochs is None:
        return tf.data.INFINITE_CARDINALITY
    total = records * num_epochs
    return total // batch_size if drop else -(-total // batch_size)


def _shuffle_blocks(
    ds: tf.data.Dataset, buffer_records: int, block_length: int, window: int, seed: int | None
) -> tf.data.Dataset:
    """Shuffles blocks through a buffer, then permutes each window of records in one op.

    The window permutation is stateless, keyed by the seed and the window's index, so a
    checkpointed iterator resumes with exactly the order it would have had.
    """
    ds = ds.shuffle(max(1, buffer_records // block_length), seed=seed)
    key = seed if seed is not None else random.SystemRandom().randrange(1 << 62)
    return (
        ds.rebatch(window)
        .enumerate()
        .map(
            lambda index, records: tf.random.experimental.stateless_shuffle(
                records, seed=tf.stack([tf.constant(key, tf.int64), index])
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    )


def _with(features: Sequence[str] | None, label_key: str) -> Sequence[str] | None:
    if features is None or label_key in features:
        return features
    return [*features, label_key]


def _image_decoder(size: tuple[int, int] | None, channels: int):
    """Decodes a batch of encoded images: ragged at their own sizes, or dense at `size`."""

    def decode_one(encoded: tf.Tensor) -> tf.Tensor:
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        if size is None:
            return tf.RaggedTensor.from_tensor(image, ragged_rank=1)
        resized = tf.image.resize(image, size, method="bilinear")
        return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)

    if size is None:
        signature = tf.RaggedTensorSpec([None, None, channels], tf.uint8, ragged_rank=1)
    else:
        signature = tf.TensorSpec([*size, channels], tf.uint8)

    def decode(images: tf.Tensor) -> tf.Tensor:
        return tf.map_fn(decode_one, images, fn_output_signature=signature)

    return decode


def _parser(spec: dict, label_key: str | None, images: tuple | None = None):
    decode = _image_decoder(*images) if images else None

    def parse(records: tf.Tensor):
        parsed = tf.io.parse_example(records, spec)
        if decode is not None:
            parsed["image"] = decode(parsed["image"])
        if label_key is None:
            return parsed
        label = parsed.pop(label_key)
        return parsed, label

    return parse
