"""make_dataset on a real converted dataset: values, sharding across pipelines, order, options."""

from __future__ import annotations

import collections

import pytest
import tensorflow as tf

from tfdata_reader import make_dataset, read_manifest
from tfdata_reader.manifest import ManifestError

ALL_IDS = list(range(12_000))


def _ids(ds) -> list[int]:
    return [i for batch in ds for i in batch["id"].numpy().tolist()]


def test_batches_are_dicts_of_dense_and_ragged_tensors(converted):
    out, _ = converted
    batch = next(iter(make_dataset(str(out), 50, shuffle=False)))
    assert sorted(batch) == ["city", "id", "label", "note", "score", "x0", "x1", "x2", "x3"]
    assert batch["id"].shape == (50,) and batch["id"].dtype == tf.int64
    assert batch["x0"].dtype == tf.float32 and batch["city"].dtype == tf.string
    assert isinstance(batch["score"], tf.RaggedTensor)
    # id % 10 == 0 has an empty note; the others exactly one value.
    lengths = batch["note"].row_lengths().numpy().tolist()
    assert lengths == [0 if i % 10 == 0 else 1 for i in batch["id"].numpy().tolist()]


def test_one_epoch_reads_every_record_once(converted):
    out, _ = converted
    assert sorted(_ids(make_dataset(str(out), 256, seed=3))) == ALL_IDS


@pytest.mark.parametrize("n", [2, 3])
def test_input_pipelines_split_the_records_exactly_once(converted, n):
    out, _ = converted
    seen = []
    for i in range(n):
        context = tf.distribute.InputContext(n, i, n)
        part = _ids(make_dataset(str(out), 64, seed=5, input_context=context))
        assert part, f"pipeline {i} of {n} got no records"
        seen.extend(part)
    assert sorted(seen) == ALL_IDS


def test_fewer_shards_than_pipelines_is_a_clear_error(converted):
    out, manifest = converted
    n = len(manifest.shards) + 1
    with pytest.raises(ValueError, match=f"has {n - 1} shards but there are {n} input pipelines"):
        make_dataset(str(out), 8, input_context=tf.distribute.InputContext(n, 0, n))


def test_seeded_order_is_reproducible_and_shuffled(converted):
    out, _ = converted
    first = _ids(make_dataset(str(out), 100, seed=11, deterministic=True))
    again = _ids(make_dataset(str(out), 100, seed=11, deterministic=True))
    other = _ids(make_dataset(str(out), 100, seed=12, deterministic=True))
    assert first == again
    assert first != other
    assert first != sorted(first)


def test_epochs_reshuffle_and_repeat(converted):
    out, _ = converted
    ids = _ids(make_dataset(str(out), 1000, seed=2, num_epochs=2, deterministic=True))
    assert collections.Counter(ids) == collections.Counter(ALL_IDS * 2)
    assert ids[:12_000] != ids[12_000:]


def test_drop_remainder_and_feature_subset(converted):
    out, _ = converted
    batches = list(make_dataset(str(out), 5000, drop_remainder=True, features=["id", "label"]))
    assert [sorted(b) for b in batches] == [["id", "label"], ["id", "label"]]
    assert [b["id"].shape[0] for b in batches] == [5000, 5000]
    with pytest.raises(ValueError, match=r"features \['nope'\] are not in the dataset"):
        make_dataset(str(out), 8, features=["nope"])


@pytest.mark.parametrize("cache", [True, "file"])
def test_cache_keeps_every_record(converted, tmp_path, cache):
    out, _ = converted
    cache_arg = str(tmp_path / "cache") if cache == "file" else True
    ids = _ids(make_dataset(str(out), 2000, num_epochs=2, cache=cache_arg, seed=1))
    assert collections.Counter(ids) == collections.Counter(ALL_IDS * 2)


def test_values_match_the_csv(converted, sample_csv):
    from conftest import expected_rows

    out, _ = converted
    want = {int(r["id"]): r for r in expected_rows(sample_csv)}
    for batch in make_dataset(str(out), 4000, shuffle=False):
        for i, city, score in zip(
            batch["id"].numpy(), batch["city"].numpy(), batch["score"].to_list()
        ):
            row = want.pop(int(i))
            assert city.decode() == row["city"]
            assert score == (
                [] if row["score"] == "" else [pytest.approx(float(row["score"]), rel=1e-6)]
            )
    assert want == {}


def test_reading_a_path_without_manifest_names_it(tmp_path):
    with pytest.raises(ManifestError, match=f"{tmp_path}/manifest.json does not exist"):
        make_dataset(str(tmp_path), 8)


def test_read_manifest_accepts_dir_or_file(converted):
    out, manifest = converted
    assert read_manifest(str(out)) == manifest
    assert read_manifest(str(out / "manifest.json")) == manifest
