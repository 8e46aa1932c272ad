"""ConvertConfig: every flag validated once, with messages that name the flag."""

from __future__ import annotations

import pytest

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core.errors import UsageError
from beam_jobs.core.splits import parse_splits


def test_config_validation():
    from beam_jobs.core.errors import UsageError

    with pytest.raises(UsageError, match="--input is required"):
        ConvertConfig.from_flags({"output": "o"})
    with pytest.raises(UsageError, match="--num_shards must be at least 1, got 0"):
        ConvertConfig.from_flags({"input": "a.csv", "output": "o", "num_shards": 0})
    with pytest.raises(UsageError, match="--shard_prefix may hold only"):
        ConvertConfig.from_flags({"input": "a.csv", "output": "o", "shard_prefix": "a/b"})


@pytest.mark.parametrize("prefix", ["données", "a/b", "a-b", "", "data\n"])
def test_a_shard_prefix_outside_the_name_rule_is_a_usage_error(prefix):
    with pytest.raises(UsageError, match="--shard_prefix may hold only ASCII letters"):
        ConvertConfig.from_flags({"input": "a.csv", "output": "o", "shard_prefix": prefix})


def test_a_split_name_outside_the_name_rule_is_a_usage_error():
    with pytest.raises(UsageError, match="names of ASCII letters"):
        parse_splits("entraînement=80,eval=20")
    with pytest.raises(UsageError, match="names of ASCII letters"):
        parse_splits("train=80,eval\n=20")


def test_an_output_with_glob_characters_is_refused(tmp_path):
    from beam_jobs.cli import main

    path = tmp_path / "a.csv"
    path.write_text("id\n1\n")
    assert main(["convert", "--input", str(path), "--output", str(tmp_path / "ds[1]")]) == 2


def test_a_gzip_level_without_gzip_is_a_usage_error_and_gzip_records_its_level():
    from beam_jobs.core.compression import Compression
    from beam_jobs.core.sharding import ShardingOptions

    with pytest.raises(UsageError, match=r"^--compression_level 9 sets the level of GZIP shards: "
                       r"add --compression gzip, or leave the level out$"):  # fmt: skip
        ShardingOptions(compression_level=9)
    assert ShardingOptions().compression_level is None
    assert ShardingOptions(compression=Compression.GZIP).compression_level == 1
    assert ShardingOptions(compression=Compression.GZIP, compression_level=6).gzip_level == 6
    with pytest.raises(UsageError, match="--compression_level must be 1 .fastest. to 9"):
        ShardingOptions(compression=Compression.GZIP, compression_level=0)


def test_a_shuffle_seed_with_input_order_is_a_usage_error_it_would_do_nothing():
    from beam_jobs.core.sharding import RecordOrder, ShardingOptions

    with pytest.raises(UsageError, match=r"^--shuffle_seed 5 seeds the shuffled order, and "
                       r"--order input keeps the inputs' order: the seed would do nothing; "
                       r"leave one of them out$"):  # fmt: skip
        ShardingOptions(order=RecordOrder.INPUT, shuffle_seed=5)
    assert ShardingOptions(order=RecordOrder.INPUT, shuffle_seed=0).shuffle_seed == 0
    assert ShardingOptions(shuffle_seed=5).shuffle_seed == 5
