"""Several datasets (daily partitions) read as one: exactly once over input pipelines, one spec,
partitions without a manifest left out (or refused with strict=True)."""

from __future__ import annotations

import logging
import pathlib

import pytest
import tensorflow as tf
from support.datasets import convert

from tfdata_reader import make_dataset
from tfdata_reader.manifest import FeatureSpec, Manifest, ManifestError
from tfdata_reader.partitions import merge, partition_paths

_DAYS = {
    "2026-11-01": range(0, 700),
    "2026-11-02": range(700, 1000),
    "2026-11-03": range(1000, 2100),
}


def _day(folder: pathlib.Path, ids: range, *flags: str, score=lambda i: f"{i / 4}") -> None:
    folder.mkdir(parents=True)
    (folder / "raw.csv").write_text(
        "id,score,city\n" + "".join(f"{i},{score(i)},c{i % 5}\n" for i in ids)
    )
    convert([str(folder / "raw.csv")], folder / "ds", "--target_shard_bytes=8KiB", *flags)


@pytest.fixture(scope="module")
def days(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("days")
    for day, ids in _DAYS.items():
        # The second day has missing scores: the union's score may be missing.
        score = (lambda i: "" if i % 10 == 0 else f"{i / 4}") if day.endswith("02") else None
        _day(root / day, ids, "--splits=train=3,eval=1", **({"score": score} if score else {}))
    return root


def _ids(path, **options) -> list[int]:
    ds = make_dataset(path, 128, features=["id"], **options)
    return [i for batch in ds for i in batch["id"].numpy().tolist()]


def test_a_glob_reads_every_partition_once_under_two_input_pipelines(days):
    pattern = str(days / "2026-11-*" / "ds")
    every = [i for ids in _DAYS.values() for i in ids]
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
        ds = make_dataset(pattern, 64, features=["id"], seed=5, input_context=context)
        ids = [i for batch in ds for i in batch["id"].numpy().tolist()]
        assert len(ids) > 0
        assert ds.cardinality().numpy() == -(-len(ids) // 64)
        seen += ids
    assert sorted(seen) == every  # exactly once, across both pipelines
    assert make_dataset(pattern, 100).cardinality().numpy() == 21  # 2,100 records


def test_a_list_of_partitions_and_one_split_of_each(days):
    paths = [str(days / day / "ds") for day in _DAYS]
    train = _ids(paths, split="train", shuffle=False)
    evaluation = _ids(paths, split="eval", shuffle=False)
    assert sorted(train + evaluation) == [i for ids in _DAYS.values() for i in ids]
    assert not set(train) & set(evaluation)


def test_one_shuffle_goes_across_the_partitions(days):
    # A global step draws from evenly spaced places of the epoch's sequence of shards (16
    # streams for a batch of 512): every partition is in the first one.
    ds = make_dataset(str(days / "2026-11-*" / "ds"), 512, features=["id"], seed=1)
    first = next(iter(ds))["id"].numpy().tolist()
    assert {d for d, r in _DAYS.items() for i in first if i in r} == set(_DAYS)


def test_the_union_spec_takes_a_feature_missing_in_one_partition(days):
    ds = make_dataset(str(days / "2026-11-*" / "ds"), 3000, shuffle=False, label_key="")
    [batch] = list(ds)
    assert isinstance(batch["score"], tf.RaggedTensor)
    scores = dict(zip(batch["id"].numpy().tolist(), batch["score"].to_list(), strict=True))
    assert scores[710] == [] and scores[711] == [711 / 4] and scores[10] == [2.5]


def test_a_changed_dtype_is_refused_by_name(days, tmp_path):
    _day(tmp_path / "2026-11-04", range(5000, 5100), score=lambda i: f"s{i}")
    paths = [str(days / "2026-11-01" / "ds"), str(tmp_path / "2026-11-04" / "ds")]
    with pytest.raises(ValueError, match=r"2026-11-04/ds: feature 'score' is bytes there but "
                       r"float32 in .*2026-11-01/ds"):  # fmt: skip
        make_dataset(paths, 10)
    assert sorted(_ids(paths)) == [*range(700), *range(5000, 5100)]  # features=["id"]: common


def test_a_missing_feature_is_refused_by_name_unless_not_read(days, tmp_path):
    folder = tmp_path / "2026-11-05"
    folder.mkdir()
    (folder / "raw.csv").write_text("id,city\n" + "".join(f"{i},c\n" for i in range(9000, 9050)))
    convert([str(folder / "raw.csv")], folder / "ds", "--splits=train=3,eval=1")
    paths = [str(days / "2026-11-03" / "ds"), str(folder / "ds")]
    with pytest.raises(ValueError, match=r"2026-11-05/ds has no feature 'score' \(the first "):
        make_dataset(paths, 10)
    assert len(_ids(paths)) == 1100 + 50


def test_a_partition_without_manifest_is_left_out_or_refused_when_strict(days, tmp_path, caplog):
    running = tmp_path / "2026-11-06" / "ds"
    running.mkdir(parents=True)  # a conversion still running: no manifest yet
    paths = [str(days / "2026-11-02" / "ds"), str(running)]
    with caplog.at_level(logging.WARNING):
        assert sorted(_ids(paths)) == list(_DAYS["2026-11-02"])
    assert f"without a manifest (running or failed conversions): {running}" in caplog.text
    with pytest.raises(ManifestError, match=r"2026-11-06/ds/manifest.json does not exist"):
        make_dataset(paths, 10, strict=True)


def test_a_glob_that_matches_nothing_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"2025-\* matches no dataset"):
        make_dataset(str(tmp_path / "2025-*"), 10)


def test_partition_paths_expand_globs_in_order_without_duplicates():
    listing = {"b/2*": ["b/2026-11-02/", "b/2026-11-01"]}
    assert partition_paths(["b/2*", "b/2026-11-01", "c"], listing.__getitem__) == [
        "b/2026-11-01", "b/2026-11-02", "c"
    ]  # fmt: skip


def test_merge_widens_value_counts_and_missing_values_only():
    def manifest(*features):
        return Manifest(shards=[], features=list(features), compression="none")

    merged = merge(
        [
            ("a", manifest(FeatureSpec("v", "int64", [2], False), FeatureSpec("s", "bytes"))),
            (
                "b",
                manifest(
                    FeatureSpec("v", "int64", [3], False), FeatureSpec("s", "bytes", [], True)
                ),
            ),
        ],
        None,
    )
    assert merged.features == [
        FeatureSpec("v", "int64", None, False),
        FeatureSpec("s", "bytes", [], True),
    ]
    with pytest.raises(ValueError, match=r"b: compression is 'gzip' there but 'none' in a"):
        merge(
            [("a", manifest()), ("b", Manifest(shards=[], features=[], compression="gzip"))], None
        )


def test_one_dataset_named_several_ways_is_read_once(days, monkeypatch, tmp_path):
    first = days / "2026-11-01" / "ds"
    (tmp_path / "link").symlink_to(first)
    monkeypatch.chdir(days)
    named = [str(first), "2026-11-01/ds", "./2026-11-01//ds/", "../" + days.name + "/2026-11-01/ds"]
    named += [str(tmp_path / "link"), f"{first}/manifest.json", f"file://{first}"]
    ids = [i for batch in make_dataset(named, 5000, shuffle=False) for i in batch["id"].numpy()]
    assert sorted(ids) == list(_DAYS["2026-11-01"])


def test_a_dataset_location_is_resolved_and_tidied(tmp_path, monkeypatch):
    from tfdata_reader.partitions import location

    monkeypatch.chdir(tmp_path)
    manifest = str(tmp_path / "b" / "manifest.json")
    assert location("a/../b/") == location("b/manifest.json") == manifest
    assert location(f"file://{tmp_path}/b") == manifest
    assert location("gs://bucket//ds/2026/") == "gs://bucket/ds/2026/manifest.json"
