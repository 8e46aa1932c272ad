"""How records become shard files: size or count, compression, names, and the bad rows a run
may set aside. `convert` (a group of `ConvertConfig`) and `WriteShards` share these options."""

from __future__ import annotations

import dataclasses
from typing import Any

from beam_jobs.core import flags
from beam_jobs.core.compression import DEFAULT_GZIP_LEVEL, GZIP_LEVELS, Compression
from beam_jobs.core.errors import UsageError
from beam_jobs.core.units import parse_size
from tfdata_reader.manifest import NAME_RULE, RecordOrder, is_valid_name

__all__ = [
    "DEFAULT_MAX_BAD_FRACTION",
    "DEFAULT_SHARD_PREFIX",
    "DEFAULT_TARGET_SHARD_BYTES",
    "MIN_TARGET_SHARD_BYTES",
    "ShardingOptions",
]

MIN_TARGET_SHARD_BYTES = 1024
DEFAULT_TARGET_SHARD_BYTES = "256MiB"
DEFAULT_MAX_BAD_FRACTION = 0.001
DEFAULT_SHARD_PREFIX = "data"


def _size(value: Any) -> int:
    return parse_size(flags.whole_number(value))


def _compression(value: Any) -> Compression:
    if not isinstance(value, Compression):
        raise TypeError(f"must be 'none', 'gzip' or a Compression, got {value!r}")
    return value


def _order(value: Any) -> RecordOrder:
    if not isinstance(value, RecordOrder):
        raise TypeError(f"must be 'shuffled', 'input' or a RecordOrder, got {value!r}")
    return value


MAX_SEED = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class ShardingOptions:
    """Validated once, here; the writers and publishing trust them."""

    target_shard_bytes: int = flags.option(
        parse_size(DEFAULT_TARGET_SHARD_BYTES),
        parse=parse_size,
        accept=_size,
        metavar="SIZE",
        help="Wanted size of one shard on disk, e.g. 100MB, 256MiB, 1GiB (default 256MiB).",
    )
    num_shards: int | None = flags.option(
        parse=flags.parse_int,
        accept=flags.whole_number,
        metavar="N",
        help="Write exactly this many shards instead of sizing them (per split, with --splits).",
    )
    compression: Compression = flags.option(
        Compression.NONE,
        parse=Compression.parse,
        accept=_compression,
        help="Shard compression: none or gzip (default none).",
    )
    compression_level: int | None = flags.option(
        parse=flags.parse_int,
        accept=flags.whole_number,
        metavar="N",
        help="GZIP level, 1 (fastest; the default) to 9 (smallest), with --compression gzip: "
        "1-3 use ISA-L, 4-9 zlib (zlib's and TensorFlow's default is 6).",
    )
    shard_prefix: str = flags.option(
        DEFAULT_SHARD_PREFIX,
        metavar="NAME",
        help=f"Shard file name prefix, {NAME_RULE} (default {DEFAULT_SHARD_PREFIX}; with "
        "--splits the split names are the prefixes).",
    )
    order: RecordOrder = flags.option(
        RecordOrder.SHUFFLED,
        parse=RecordOrder.parse,
        accept=_order,
        help="Record order of the shards: shuffled (the default: a seeded random order across "
        "all shards, so that any run of records, and so every training batch, is a random "
        "sample of the whole input, however the input is sorted) or input (the inputs' order: "
        "files sorted by path, rows in file order; for sequences, time series or data sorted "
        "on purpose).",
    )
    shuffle_seed: int = flags.option(
        0,
        parse=flags.parse_int,
        accept=flags.whole_number,
        metavar="N",
        help="Seed of the shuffled order, 0 to 2**63-1 (default 0): the same inputs, options "
        "and seed give byte-identical shards; recorded in the manifest. Refused with --order "
        "input, where it would do nothing.",
    )
    max_bad_fraction: float = flags.option(
        DEFAULT_MAX_BAD_FRACTION,
        parse=flags.parse_float,
        accept=flags.number,
        metavar="F",
        help="Largest share of input rows that may fail to convert (they go to "
        "OUTPUT/dead_letter/); above it the job fails and publishes no manifest "
        f"(default {DEFAULT_MAX_BAD_FRACTION}).",
    )

    @property
    def gzip_level(self) -> int:
        """The GZIP level the writers use (`compression_level`, or the default)."""
        return DEFAULT_GZIP_LEVEL if self.compression_level is None else self.compression_level

    def __post_init__(self) -> None:
        if self.target_shard_bytes < MIN_TARGET_SHARD_BYTES and self.num_shards is None:
            raise UsageError(
                f"--target_shard_bytes must be at least {MIN_TARGET_SHARD_BYTES} bytes, "
                f"got {self.target_shard_bytes}"
            )
        if self.num_shards is not None and self.num_shards < 1:
            raise UsageError(f"--num_shards must be at least 1, got {self.num_shards}")
        if self.compression_level is None and self.compression == Compression.GZIP:
            object.__setattr__(self, "compression_level", DEFAULT_GZIP_LEVEL)  # as recorded
        elif self.compression_level is not None:
            if self.compression_level not in GZIP_LEVELS:
                raise UsageError(
                    f"--compression_level must be 1 (fastest) to 9 (smallest), got "
                    f"{self.compression_level}"
                )
            if self.compression != Compression.GZIP:
                raise UsageError(
                    f"--compression_level {self.compression_level} sets the level of GZIP "
                    "shards: add --compression gzip, or leave the level out"
                )
        if not 0.0 <= self.max_bad_fraction <= 1.0:
            raise UsageError(
                f"--max_bad_fraction must be between 0 and 1, got {self.max_bad_fraction}"
            )
        if not 0 <= self.shuffle_seed <= MAX_SEED:
            raise UsageError(f"--shuffle_seed must be 0 to 2**63-1, got {self.shuffle_seed}")
        if self.shuffle_seed and self.order is RecordOrder.INPUT:
            raise UsageError(
                f"--shuffle_seed {self.shuffle_seed} seeds the shuffled order, and --order input "
                "keeps the inputs' order: the seed would do nothing; leave one of them out"
            )
        if not is_valid_name(self.shard_prefix):
            raise UsageError(f"--shard_prefix may hold only {NAME_RULE}, got {self.shard_prefix!r}")
