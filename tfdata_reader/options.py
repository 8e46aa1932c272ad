"""`ReadOptions`: how `make_dataset` reads a dataset, validated once (like `tfds.ReadConfig`).

Pure Python: no TensorFlow import, so options can be built and checked anywhere.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence

__all__ = ["AUTOTUNE", "ReadOptions"]

AUTOTUNE = -1  # tf.data.AUTOTUNE's value
DEFAULT_CYCLE_LENGTH = 16
DEFAULT_SHUFFLE_BUFFER = 10_000
DEFAULT_BLOCK_LENGTH = 64
DEFAULT_SHUFFLE_WINDOW = 4096
DEFAULT_RESHUFFLE_BYTES = 64 << 20
MAX_SEED = 2**63 - 1  # an int64, as TensorFlow's seeds and the converter's --shuffle_seed
_IMAGE_CHANNELS = (1, 3, 4)


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """Everything `make_dataset` takes besides the path and the batch size, by what it is for:
    what comes out (any dataset), random batches of a shuffled dataset (its epoch order), and
    reading in blocks (a dataset in input order, `shuffle=False`, or `cache`).

    What comes out:
      features: names of the features to parse (default all).
      label_key: return `(features, label)` tuples with this feature as the label, for Keras
        (default: the label the manifest names, from `convert --label`; "" for none). A text
        label with a vocabulary in the manifest comes as its int64 id (-1 when missing); a
        number label that may be missing comes dense too, -1 (int64) or NaN (float32) there.
      split: read only this split of a dataset converted with `--splits` (e.g. "train").
      num_epochs: passes over the data; None repeats forever.
      drop_remainder: drop a last batch smaller than the batch size.
      fill_missing: {feature: value} for one-value features that may be missing: they come
        dense, `[batch]`, with `value` where a record has none, so `keras.Input(shape=())`
        takes them (e.g. `{"score": 0.0}`).
      ragged: False fills every one-value feature that may be missing this way, with 0, 0.0 or
        b"" by dtype unless `fill_missing` says otherwise (lists of varying length stay ragged).
      decode_images: decode the `image` feature (JPEG, PNG, GIF, BMP) into uint8 tensors of
        `image_channels` channels: a `tf.RaggedTensor` [batch, None, None, channels] of each
        image's own size, or dense [batch, height, width, channels] with `image_size`.
      image_size: (height, width) every decoded image is resized to (bilinear), so they batch
        densely.
      image_channels: channels of decoded images (1 grayscale, 3 RGB, 4 RGBA).
      skip_corrupt_shards: check this pipeline's shards against the manifest (size and CRC32C,
        one extra read) before reading, and leave out the bad ones with a logged warning that
        names each and says why, instead of failing when reading reaches them.
      strict: reading several datasets, refuse one without a manifest (a conversion still
        running, or failed) instead of leaving it out with a warning.
      num_parallel_calls: parallelism of reading and parsing (default AUTOTUNE).
      deterministic: force (True) or relax (False) element order. None keeps the epoch order
        of a shuffled dataset (its steps and resuming depend on it); for a dataset in input
        order it relaxes the order when shuffling without a seed (tf.data may then hand out
        whichever block or batch is ready first) and keeps tf.data's default otherwise.

    Random batches (`shuffle`; a shuffled dataset is read in its epoch order):
      shuffle: random batches. A dataset converted in shuffled order (the default) is read in
        a seeded epoch order (`tfdata_reader.order`: the same global steps on any number of
        input pipelines, resumable); one in input order has its shard order, blocks (through
        a buffer of about `shuffle_buffer_size` records) and windows of `shuffle_window`
        records shuffled.
      seed: seed of the order, 0 to 2**63-1 (a shuffled dataset: default 0, so that every
        worker agrees); each epoch still gets its own order derived from it.
      start_epoch: the epoch the first iteration reads (a shuffled dataset, `shuffle`): each
        epoch's order is a function of `seed` and the epoch alone; later iterations read the
        epochs after it (or use a `ReadPosition`, which a checkpoint saves).
      start_step: the global step of `start_epoch` to start at (resuming; on any number of
        input pipelines). Both, like `position`, are refused where there is no epoch order
        (a dataset in input order, `shuffle=False`, `cache`).
      streams: how many streams a global step draws from (default: `order.stream_count` of
        the global batch: 8 for 256, 32 for 1,024); a divisor of the global batch. Input
        pipelines that divide it read nothing twice.
      reshuffle_bytes: memory an input pipeline gives to drawing each epoch's batches anew (a
        shuffled dataset): each stream is read in windows of as many steps' records as all
        streams' windows fit in it, each permuted. The more steps a window holds, the rarer
        two records of one batch meet again in the next epoch (a window of the whole epoch:
        as rarely as with a full reshuffle). It decides the order, like `seed`: resume with
        the same. Peak memory is about twice it.

    Reading in blocks (a dataset in input order, `shuffle=False`, or `cache`):
      cache: True to cache records in memory after the first epoch, or a file path prefix.
      cycle_length: shards read in parallel (default min(16, shards read)).
      block_length: consecutive records taken from one shard before moving to the next
        (default 64: interleaving blocks is several times faster than single records).
      shuffle_buffer_size: records held for shuffling, as blocks of `block_length`.
      shuffle_window: records permuted together after the block shuffle; a batch draws from
        about `shuffle_window / block_length` different blocks.

    Raises:
      ValueError: naming the bad option, its value and what is accepted.
    """

    # What comes out.
    features: tuple[str, ...] | None = None
    label_key: str | None = None
    split: str | None = None
    num_epochs: int | None = 1
    drop_remainder: bool = False
    fill_missing: Mapping[str, int | float | str | bytes] | None = None
    ragged: bool = True
    decode_images: bool = False
    image_size: tuple[int, int] | None = None
    image_channels: int = 3
    skip_corrupt_shards: bool = False
    strict: bool = False
    num_parallel_calls: int = AUTOTUNE
    deterministic: bool | None = None
    # Random batches.
    shuffle: bool = True
    seed: int | None = None
    start_epoch: int = 0
    start_step: int = 0
    streams: int | None = None
    reshuffle_bytes: int = DEFAULT_RESHUFFLE_BYTES
    # Reading in blocks.
    cache: bool | str | None = None
    cycle_length: int | None = None
    block_length: int = DEFAULT_BLOCK_LENGTH
    shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW

    def __post_init__(self) -> None:
        if self.features is not None:
            if isinstance(self.features, str):
                raise ValueError(
                    f"features must be a list of names, got the string {self.features!r}"
                )
            object.__setattr__(self, "features", tuple(self.features))
        if self.image_size is not None:
            object.__setattr__(self, "image_size", tuple(self.image_size))
        self._check_counts()
        self._check_images()
        if self.fill_missing is not None and not isinstance(self.fill_missing, Mapping):
            raise ValueError(
                f"fill_missing must be a dict of feature name -> value, got {self.fill_missing!r}"
            )

    def _check_counts(self) -> None:
        if self.num_epochs is not None and self.num_epochs < 1:
            raise ValueError(
                f"num_epochs must be at least 1 or None (forever), got {self.num_epochs}"
            )
        for name in ("block_length", "shuffle_buffer_size", "shuffle_window", "reshuffle_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("start_epoch", "start_step"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, numbers.Integral)
            or not 0 <= self.seed <= MAX_SEED
        ):
            raise ValueError(f"seed must be None or a whole number 0 to 2**63-1, got {self.seed!r}")
        if self.seed is not None:
            object.__setattr__(self, "seed", int(self.seed))  # a NumPy integer too
        if self.streams is not None and self.streams < 1:
            raise ValueError(f"streams must be at least 1 or None, got {self.streams}")
        if self.cycle_length is not None and self.cycle_length < 1:
            raise ValueError(f"cycle_length must be at least 1 or None, got {self.cycle_length}")
        if self.num_parallel_calls != AUTOTUNE and self.num_parallel_calls < 1:
            raise ValueError(
                f"num_parallel_calls must be at least 1 or AUTOTUNE, got {self.num_parallel_calls}"
            )

    def _check_images(self) -> None:
        if self.image_size is not None and not self.decode_images:
            raise ValueError("image_size needs decode_images=True")
        if self.image_size is not None and (len(self.image_size) != 2 or min(self.image_size) < 1):
            raise ValueError(f"image_size must be (height, width) >= 1, got {self.image_size}")
        if self.image_channels not in _IMAGE_CHANNELS:
            raise ValueError(
                f"image_channels must be one of {_IMAGE_CHANNELS}, got {self.image_channels}"
            )

    @property
    def element_order_deterministic(self) -> bool | None:
        """`deterministic` as tf.data gets it reading in blocks (input order): relaxed when
        shuffling without a seed."""
        if self.deterministic is None and self.shuffle and self.seed is None:
            return False
        return self.deterministic

    def parsed_features(self) -> Sequence[str] | None:
        """The features to parse: `features` plus the label (None: all of them)."""
        if self.features is None or not self.label_key or self.label_key in self.features:
            return self.features
        return (*self.features, self.label_key)
