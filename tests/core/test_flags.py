"""The flag table: command-line text and Python values become the same typed config, and a bad
value is a UsageError naming the flag (never SystemExit, never a TypeError)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import pathlib

import pytest

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core import flags
from beam_jobs.core.compression import Compression
from beam_jobs.core.errors import UsageError
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.splits import Split
from beam_jobs.job.argv import split_argv


@dataclasses.dataclass(frozen=True)
class _Inner:
    size: int = flags.option(3, parse=flags.parse_int, accept=flags.whole_number, help="inner")


@dataclasses.dataclass(frozen=True)
class _Outer:
    names: tuple[str, ...] = flags.option(
        (), name="name", repeated=True, accept=flags.path_value, help="repeated"
    )
    flag: bool = flags.option(
        False, parse=flags.parse_bool, accept=flags.accept_bool, bare="true", help="bare"
    )
    inner: _Inner = flags.group(_Inner)
    secret: str = flags.option("x", aliases=("s",), recorded=False, help="not recorded")
    plain: int = 0  # no flag


def test_a_table_lists_its_flags_and_its_groups_flags_in_order():
    assert [f.name for f in flags.flags(_Outer)] == ["name", "flag", "size", "secret"]
    assert flags.find(_Outer, "s") == flags.find(_Outer, "secret")
    assert flags.find(_Outer, "plain") is None


@pytest.mark.parametrize(
    "given, expected",
    [
        ({}, _Outer()),
        ({"name": ["a", "b"], "flag": "true", "size": "7"}, _Outer(("a", "b"), True, _Inner(7))),
        ({"name": "a", "flag": True, "size": 7}, _Outer(("a",), True, _Inner(7))),
        ({"name": [pathlib.Path("p")], "s": "y"}, _Outer(("p",), secret="y")),
        ({"size": None}, _Outer()),
    ],
)
def test_text_and_python_values_give_the_same_typed_values(given, expected):
    assert _Outer(**flags.values(_Outer, given)) == expected


@pytest.mark.parametrize(
    "given, message",
    [
        ({"size": 3.7}, "--size must be a whole number, got float 3.7"),
        ({"size": True}, "--size must be a whole number, got bool True"),
        ({"size": "x"}, "--size must be a whole number, got 'x'"),
        ({"flag": "maybe"}, "--flag must be true or false, got 'maybe'"),
        ({"flag": 1}, "--flag must be True or False, got int 1"),
        ({"name": 5}, "--name takes a list of values, got int 5"),
        ({"secret": 5}, "--secret takes text, got int 5"),
        ({"secret": "a", "s": "b"}, "--secret and --s are one flag: give it once"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_the_flag(given, message):
    with pytest.raises(UsageError) as raised:
        flags.values(_Outer, given)
    assert str(raised.value) == message


def test_recorded_values_are_json_values_without_the_run_flags():
    outer = _Outer(("a",), True, _Inner(7), "y")
    assert flags.recorded(outer) == {"names": ["a"], "flag": True, "size": 7}


def test_argparse_gives_each_flag_its_text_or_none():
    parser = argparse.ArgumentParser()
    flags.add_arguments(parser, _Outer)
    args = flags.bare_values(["--name", "a", "--name", "b", "--flag", "--s", "y"], _Outer)
    parsed = vars(parser.parse_args(args))
    assert parsed == {"name": ["a", "b"], "flag": "true", "size": None, "secret": "y"}
    assert _Outer(**flags.values(_Outer, parsed)) == _Outer(("a", "b"), True, secret="y")


def test_the_command_line_and_python_keywords_build_one_config():
    ours, beams = split_argv(
        ["--input=a.csv", "--output=o", "--splits=t=3,e=1", "--compression=gzip",
         "--target_shard_bytes=2KiB", "--run_date=2026-01-02", "--rename=a=b", "--runner=X"]
    )  # fmt: skip
    assert beams == ["--runner=X"]
    from_text = ConvertConfig.from_flags(ours)
    from_python = ConvertConfig.from_flags(
        {"input": pathlib.Path("a.csv"), "output": "o", "splits": {"t": 3, "e": 1},
         "compression": Compression.GZIP, "target_shard_bytes": 2048,
         "run_date": datetime.date(2026, 1, 2), "rename": {"a": "b"}}
    )  # fmt: skip
    assert from_text == from_python
    assert from_text.splits == (Split("t", 3), Split("e", 1))
    assert from_text.sharding == ShardingOptions(target_shard_bytes=2048, compression="gzip")
    assert from_text.to_json()["splits"] == [["t", 3], ["e", 1]]
    assert from_text.to_json()["compression"] == "gzip"


def test_the_manifests_options_keep_their_keys():
    config = ConvertConfig.from_flags({"input": "a.csv", "output": "o", "run_date": "2026-01-02"})
    assert list(config.to_json()) == [
        "inputs", "output", "format", "delimiter", "column_names", "skip_header_lines",
        "encoding", "null_values", "infer_null_values", "units_row", "schema", "labels",
        "splits", "split_key", "columns", "renames", "label", "target_shard_bytes",
        "num_shards", "compression", "compression_level", "shard_prefix", "order",
        "shuffle_seed", "max_bad_fraction", "sample_bytes", "max_record_bytes",
    ]  # fmt: skip


def test_an_unknown_flag_is_named():
    with pytest.raises(UsageError, match="unknown flag compresion;"):
        ConvertConfig.from_flags({"input": "a.csv", "output": "o", "compresion": "gzip"})


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--flag"], ["--flag=true"]),
        (["--flag", "false"], ["--flag=false"]),
        (["--flag", "NO", "x"], ["--flag=NO", "x"]),
        (["--flag", "x.csv"], ["--flag=true", "x.csv"]),  # a loose word stays loose
        (["--flag=0"], ["--flag=0"]),
    ],
)
def test_a_bare_flag_takes_only_a_true_false_word_after_it(argv, expected):
    assert flags.bare_values(argv, _Outer) == expected


@pytest.mark.parametrize("empty", [None, "", "  ", [], {}, ()])
def test_an_empty_value_is_not_given_where_the_default_is_empty(empty):
    assert _Outer(**flags.values(_Outer, {"name": empty})) == _Outer()
    if empty is not None:  # "x" is no default to fall back on: the empty value is checked
        with pytest.raises(UsageError):
            flags.values(_Outer, {"size": empty})


def test_numpy_numbers_and_whole_floats_are_numbers():
    import numpy as np

    assert flags.whole_number(np.int64(3)) == 3 and flags.whole_number(1e6) == 1_000_000
    assert flags.number(np.float32(0.01)) == 0.01
    assert flags.accept_bool(np.True_) is True
    with pytest.raises(TypeError, match="whole number"):
        flags.whole_number(np.bool_(True))


def test_lists_of_the_command_lines_texts_are_taken_too():
    config = ConvertConfig.from_flags(
        {"input": "a.csv", "output": "o", "splits": ["t=3", "e=1"], "rename": ["a=b"]}
    )
    assert config.splits == (Split("t", 3), Split("e", 1))
    assert config.projection.renames == (("a", "b"),)


def test_the_images_labels_file_keeps_its_manifest_key():
    # Manifests have always recorded it as "labels": a rerun over an older dataset compares it.
    config = ConvertConfig.from_flags(
        {"input": "imgs/", "output": "o", "format": "images", "labels": "l.csv"}
    )
    assert config.to_json()["labels"] == "l.csv" and "image_labels" not in config.to_json()
