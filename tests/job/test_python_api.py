"""The Python side of the tool: `beam_jobs.convert(...)` and Keras-ready dense features
(`make_dataset(fill_missing=..., ragged=False)`)."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys

import pytest
from support.datasets import IN_PROCESS, ROOT, read_all

from beam_jobs import DataError, UsageError, convert
from beam_jobs.api import convert_config
from beam_jobs.config.convert import ConvertConfig
from beam_jobs.job.argv import split_argv

_QUIET = dict(arg.removeprefix("--").split("=", 1) for arg in IN_PROCESS)


def test_keywords_build_the_config_the_flags_build():
    config = convert_config(
        ["a/*.csv", "b/*.csv"], "out", splits={"train": 80, "eval": 20}, columns=["x", "y"],
        rename={"x": "z"}, label="y", overwrite=True, num_shards=3, schema=None,
        target_shard_bytes=1 << 20, run_date="2026-12-01",
    )  # fmt: skip
    ours, beams = split_argv([
        "--input", "a/*.csv", "--input", "b/*.csv", "--output", "out",
        "--splits=train=80,eval=20", "--columns=x,y", "--rename=x=z", "--label=y",
        "--overwrite", "--num_shards=3", "--target_shard_bytes=1MiB",
        "--run_date=2026-12-01", "--direct_num_workers=2",
    ])  # fmt: skip
    assert beams == ["--direct_num_workers=2"]
    assert config == ConvertConfig.from_flags(ours)
    assert config.splits[0].name == "train" and config.sharding.num_shards == 3


def test_an_unknown_keyword_is_named():
    with pytest.raises(UsageError, match=r"unknown keyword argument compresion \(did you mean "):
        convert_config("a.csv", "out", compresion="gzip")


def _scores_csv(path) -> list[dict]:
    rows = [{"id": i, "score": "" if i % 3 == 0 else f"{i / 8}", "name": f"n{i}",
             "tags": "", "y": i % 2} for i in range(300)]  # fmt: skip
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_convert_runs_the_conversion_the_command_runs(tmp_path):
    expected = _scores_csv(tmp_path / "in.csv")
    result = convert(str(tmp_path / "in.csv"), str(tmp_path / "out"), num_shards=2,
                     label="y", pipeline_options=_QUIET)  # fmt: skip
    assert result.converted and result.manifest.total_records == 300
    assert result.manifest.label == "y"
    again = convert(str(tmp_path / "in.csv"), str(tmp_path / "out"), num_shards=2,
                    label="y", pipeline_options=_QUIET)  # fmt: skip
    assert not again.converted and again.manifest.fingerprint == result.manifest.fingerprint
    got = sorted(read_all(tmp_path / "out", label_key=""), key=lambda r: r["id"])
    assert [r["id"] for r in got] == [int(e["id"]) for e in expected]


def test_convert_raises_the_typed_errors(tmp_path):
    with pytest.raises(UsageError, match="--compression must be one of"):
        convert(str(tmp_path / "x.csv"), str(tmp_path / "out"), compression="zip")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3,4,5\n" + "4,5\n" * 10)
    with pytest.raises(DataError):
        convert(str(tmp_path / "bad.csv"), str(tmp_path / "out"), max_bad_fraction=0.0,
                pipeline_options=_QUIET)  # fmt: skip


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scores")
    expected = _scores_csv(folder / "in.csv")
    convert(str(folder / "in.csv"), str(folder / "out"), num_shards=2, label="y",
            pipeline_options=_QUIET)  # fmt: skip
    return folder / "out", expected


def _batches(out, **options):
    from tfdata_reader import make_dataset

    return list(make_dataset(str(out), 1000, shuffle=False, **options))


def test_fill_missing_gives_dense_values_with_the_default_where_missing(scores):
    out, expected = scores
    [(features, label)] = _batches(out, fill_missing={"score": -1.5})
    assert features["score"].shape == (300,) and label.shape == (300,)
    want = {int(e["id"]): -1.5 if e["score"] == "" else float(e["score"]) for e in expected}
    assert (
        dict(zip(features["id"].numpy().tolist(), features["score"].numpy().tolist(), strict=True))
        == want
    )
    assert hasattr(features["name"], "shape") and features["name"].shape == (300,)  # never missing


def test_ragged_false_fills_every_one_value_feature_by_dtype(scores):
    out, expected = scores
    [(features, _)] = _batches(out, ragged=False, fill_missing={"tags": "none"})
    want = {int(e["id"]): 0.0 if e["score"] == "" else float(e["score"]) for e in expected}
    assert (
        dict(zip(features["id"].numpy().tolist(), features["score"].numpy().tolist(), strict=True))
        == want
    )
    assert set(features["tags"].numpy().tolist()) == {b"none"}


def test_fill_missing_takes_the_label_too(scores):
    out, _ = scores
    [(_, label)] = _batches(out, label_key="score", fill_missing={"score": 9.0})
    assert label.shape == (300,) and label.numpy().tolist().count(9.0) == 100
    [(_, label)] = _batches(out, label_key="score")
    assert sum(math.isnan(v) for v in label.numpy().tolist()) == 100


@pytest.mark.parametrize(
    "fill, message",
    [
        ({"nope": 1}, r"'nope' is not a feature read"),
        ({"score": "high"}, r"'score' is float32; 'high' is not a value of it"),
        ({"id": True}, r"'id' is int64; True is not a value of it"),
    ],
)
def test_fill_missing_refuses_what_it_cannot_fill(scores, fill, message):
    from tfdata_reader import make_dataset

    with pytest.raises(ValueError, match=message):
        make_dataset(str(scores[0]), 10, fill_missing=fill)


def test_fill_missing_refuses_a_list_feature(tmp_path):
    from tfdata_reader import make_dataset

    path = tmp_path / "lists.jsonl"
    path.write_text("".join(f'{{"v": {list(range(i % 3))}}}\n' for i in range(50)))
    convert(str(path), str(tmp_path / "out"), pipeline_options=_QUIET)
    with pytest.raises(ValueError, match=r"'v' holds a list of values per record"):
        make_dataset(str(tmp_path / "out"), 10, fill_missing={"v": 0})


@pytest.mark.slow
def test_the_python_example_converts_and_fits(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "convert_and_fit.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "converted: True, records: 4000, shards: 5, splits: ['eval', 'train']"
    assert float(lines[-1].rsplit(" ", 1)[1]) >= 0.9, lines[-1]


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"num_shards": 3.7}, "--num_shards must be a whole number, got float 3.7"),
        ({"num_shards": True}, "--num_shards must be a whole number, got bool True"),
        ({"overwrite": "perhaps"}, "--overwrite must be true or false, got 'perhaps'"),
        ({"splits": ["train"]}, "--splits must look like train=80,eval=20"),
        ({"splits": [("train", 1.5)]}, "pairs with whole weights"),
        ({"pipeline_options": ["--runner=X"]}, "pipeline_options must be a dict of Beam's"),
        ({"pipeline_options": {"direct_num_workers": "two"}}, "invalid int value: 'two'"),
        ({"pipeline_options": {"compression": "gzip"}}, "compression is a flag of convert"),
    ],
)
def test_a_bad_argument_is_a_usage_error_never_an_exit(tmp_path, keywords, message):
    (tmp_path / "in.csv").write_text("a\n1\n")
    with pytest.raises(UsageError) as raised:
        convert(tmp_path / "in.csv", tmp_path / "out", **keywords)
    assert message in str(raised.value)
    assert len(str(raised.value).splitlines()) <= 2
    assert not (tmp_path / "out").exists()


def test_paths_may_be_pathlib_paths(tmp_path):
    (tmp_path / "in.csv").write_text("a\n1\n2\n")
    result = convert(tmp_path / "in.csv", tmp_path / "out", dry_run=True)
    assert result.plan is not None and result.config.inputs == (str(tmp_path / "in.csv"),)
    assert result.status.value == "dry_run"


def test_beams_options_are_taken_by_their_flag_names():
    from apache_beam.runners.dask.dask_runner import DaskOptions

    from beam_jobs.job.argv import beam_options

    options = beam_options(
        {"runner": "DaskRunner", "dask_client_address": "tcp://127.0.0.1:1",
         "labels": ["team=x"], "experiments": ["a", "b"], "save_main_session": True}
    )  # fmt: skip
    assert options.view_as(DaskOptions).address == "tcp://127.0.0.1:1"
    everything = options.get_all_options()
    assert everything["labels"] == ["team=x"] and everything["experiments"] == ["a", "b"]
    assert everything["save_main_session"] is True
