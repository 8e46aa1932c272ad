"""How records become shard files: size or count, compression, names, and the bad rows a run
may set aside. `convert` (a group of `ConvertConfig`) and `WriteShards` share these options."""

from __future__ import annotations

import dataclasses
from typing import Any

from beam_jobs.core import flags
from beam_jobs.core.compression import DEFAULT_GZIP_LEVEL, GZIP_LEVELS, Compression
from beam_jobs.core.errors import UsageError
from beam_jobs.core.units import parse_size
from tfdata_reader.manifest import NAME_RULE, is_valid_name

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
    compression_level: int = flags.option(
        DEFAULT_GZIP_LEVEL,
        parse=flags.parse_int,
        accept=flags.whole_number,
        metavar="N",
        help="GZIP level, 1 (fastest; the default) to 9 (smallest): 1-3 use ISA-L, 4-9 zlib "
        "(zlib's and TensorFlow's default is 6).",
    )
    shard_prefix: str = flags.option(
        DEFAULT_SHARD_PREFIX,
        metavar="NAME",
        help=f"Shard file name prefix, {NAME_RULE} (default {DEFAULT_SHARD_PREFIX}; with "
        "--splits the split names are the prefixes).",
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

    def __post_init__(self) -> None:
        if self.target_shard_bytes < MIN_TARGET_SHARD_BYTES and self.num_shards is None:
            raise UsageError(
                f"--target_shard_bytes must be at least {MIN_TARGET_SHARD_BYTES} bytes, "
                f"got {self.target_shard_bytes}"
            )
        if self.num_shards is not None and self.num_shards < 1:
            raise UsageError(f"--num_shards must be at least 1, got {self.num_shards}")
        if self.compression_level not in GZIP_LEVELS:
            raise UsageError(
                f"--compression_level must be 1 (fastest) to 9 (smallest), got "
                f"{self.compression_level}"
            )
        if not 0.0 <= self.max_bad_fraction <= 1.0:
            raise UsageError(
                f"--max_bad_fraction must be between 0 and 1, got {self.max_bad_fraction}"
            )
        if not is_valid_name(self.shard_prefix):
            raise UsageError(f"--shard_prefix may hold only {NAME_RULE}, got {self.shard_prefix!r}")
