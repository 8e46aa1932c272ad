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


@pytest.fixture(scope="module")
def three_shards(sample_csv, tmp_path_factory):
    from support.datasets import convert

    out = tmp_path_factory.mktemp("three") / "ds"
    convert(sample_csv, out, "--num_shards=3", "--compression=gzip")
    return out


@pytest.mark.parametrize(
    "fixture, n",
    [("converted", 2), ("converted", 3), ("three_shards", 4), ("three_shards", 7)],
)
def test_input_pipelines_split_the_records_exactly_once(request, fixture, n):
    """By whole shards (33 shards), and by record ranges when shards are fewer than pipelines."""
    value = request.getfixturevalue(fixture)
    out = value[0] if isinstance(value, tuple) else value
    seen = []
    for i in range(n):
        context = tf.distribute.InputContext(n, i, n)
        ds = make_dataset(str(out), 64, seed=5, input_context=context)
        part = _ids(ds)
        assert part, f"pipeline {i} of {n} got no records"
        assert ds.cardinality().numpy() == -(-len(part) // 64)
        seen.extend(part)
    assert sorted(seen) == ALL_IDS


def test_cardinality_is_known(converted):
    out, _ = converted
    assert make_dataset(str(out), 256).cardinality().numpy() == 47  # ceil(12000 / 256)
    assert make_dataset(str(out), 256, drop_remainder=True).cardinality().numpy() == 46
    assert make_dataset(str(out), 256, num_epochs=3).cardinality().numpy() == 141
    assert make_dataset(str(out), 256, num_epochs=None).cardinality().numpy() == -1  # infinite


def test_label_key_gives_keras_tuples(converted):
    out, _ = converted
    features, label = next(iter(make_dataset(str(out), 8, label_key="label", features=["x0"])))
    assert sorted(features) == ["x0"]
    assert label.shape == (8,) and label.dtype == tf.int64


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
    from support.datasets import expected_rows

    out, _ = converted
    want = {int(r["id"]): r for r in expected_rows(sample_csv)}
    for batch in make_dataset(str(out), 4000, shuffle=False):
        for i, city, score in zip(
            batch["id"].numpy(), batch["city"].numpy(), batch["score"].to_list(), strict=True
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


def _damaged_copy(converted, tmp_path, damage):
    import shutil

    out, manifest = converted
    copy = tmp_path / "ds"
    shutil.copytree(out, copy)
    shard = copy / manifest.shards[4].path
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(shard))]
    damage(shard, records)
    return copy, shard


def _cut_last_three(shard, records):
    keep = sum(len(r) + 16 for r in records[:-3])
    shard.write_bytes(shard.read_bytes()[:keep])


def _append_a_record(shard, records):
    from beam_jobs.codec.framing import frame_records

    shard.write_bytes(shard.read_bytes() + frame_records(records[:1]))


def _flip_a_bit(shard, records):
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x10
    shard.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_cut_last_three, _append_a_record, _flip_a_bit])
def test_a_damaged_shard_fails_reading_and_names_the_file(converted, tmp_path, damage):
    copy, shard = _damaged_copy(converted, tmp_path, damage)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        _ids(make_dataset(str(copy), 500))
    message = str(e.value)
    assert f"[shard] [{shard}] [does not hold the] [" in message
    assert "it is truncated, corrupt or replaced" in message


def test_a_gzip_shard_of_several_members_fails_reading_and_says_what_it_may_be(tmp_path):
    from support.gzip_files import as_members, gzip_dataset

    out, manifest = gzip_dataset(tmp_path)
    shard = as_members(out, manifest)  # TensorFlow stops at its empty first member
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        _ids(make_dataset(str(out), 50, shuffle=False))
    message = str(e.value)
    assert f"[shard] [{out / shard}] [does not hold the] [{manifest.total_records}]" in message
    assert "a GZIP file of several members, as earlier versions joined parts" in message


def test_a_damaged_shard_outside_this_pipelines_range_does_not_matter(converted, tmp_path):
    copy, _ = _damaged_copy(converted, tmp_path, _cut_last_three)
    # Read in blocks (not in the epoch order, where every pipeline reads a part of each shard),
    # pipeline 1 reads shards 1, 3, 5...; shard 4 is damaged.
    context = tf.distribute.InputContext(2, 1, 2)
    assert len(_ids(make_dataset(str(copy), 500, shuffle=False, input_context=context))) > 0


def test_resume_from_a_checkpoint_mid_epoch(converted, tmp_path):
    out, _ = converted

    def dataset():
        return make_dataset(str(out), 100, seed=9, deterministic=True, features=["id"])

    uninterrupted = _ids(dataset())
    iterator = iter(dataset())
    before = [i for _ in range(37) for i in next(iterator)["id"].numpy().tolist()]
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    saved = checkpoint.save(str(tmp_path / "ckpt"))
    del iterator, checkpoint

    restored = iter(dataset())
    tf.train.Checkpoint(iterator=restored).restore(saved)
    after = [i for batch in restored for i in batch["id"].numpy().tolist()]
    assert before + after == uninterrupted
    assert sorted(before + after) == ALL_IDS


@pytest.mark.parametrize("damage", [_cut_last_three, _flip_a_bit])
def test_skip_corrupt_shards_reads_the_rest_and_names_what_it_skipped(
    converted, tmp_path, damage, caplog
):
    out, manifest = converted
    copy, shard = _damaged_copy(converted, tmp_path, damage)
    all_ids = _ids(make_dataset(str(out), 1000, shuffle=False, features=["id"]))
    # The ids of the damaged shard, read from the intact original.
    original = out / manifest.shards[4].path
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    shard_ids = [
        int(tf.io.parse_single_example(r, spec)["id"])
        for r in tf.data.TFRecordDataset(str(original))
    ]
    with caplog.at_level("WARNING", logger="tfdata_reader.dataset"):
        ds = make_dataset(str(copy), 1000, skip_corrupt_shards=True)
    assert sorted(_ids(ds)) == sorted(set(all_ids) - set(shard_ids))
    assert ds.cardinality().numpy() == -(-(12_000 - len(shard_ids)) // 1000)
    [message] = [r.getMessage() for r in caplog.records]
    assert message.startswith(f"skipping 1 corrupt shard(s) ({len(shard_ids)} records): {shard}: ")


def test_skip_corrupt_shards_with_nothing_left(converted, tmp_path):
    import shutil

    out, manifest = converted
    copy = tmp_path / "ds"
    shutil.copytree(out, copy)
    for shard in manifest.shards:
        (copy / shard.path).write_bytes(b"")
    with pytest.raises(ValueError, match="the reader has no records to read: .* were skipped"):
        make_dataset(str(copy), 8, skip_corrupt_shards=True)


def test_a_file_cache_never_serves_another_conversion(tmp_path):
    from support.datasets import convert

    raw = tmp_path / "raw.csv"
    cache = str(tmp_path / "cache")
    for version in (1, 2):  # the same record count: only the values differ
        raw.write_text("id,v\n" + "".join(f"{i},{i * version}\n" for i in range(50)))
        convert([str(raw)], tmp_path / "ds", "--overwrite")
        [batch] = make_dataset(str(tmp_path / "ds"), 100, shuffle=False, cache=cache)
        assert sorted(batch["v"].numpy().tolist()) == [i * version for i in range(50)]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda out: make_dataset(out, 2.5), "batch_size must be a whole number of at least 1"),
        (lambda out: make_dataset(out, True), "batch_size must be a whole number of at least 1"),
        (lambda out: make_dataset(out, 8, label_key="ghost"), "label_key 'ghost' is not a feat"),
    ],
)
def test_bad_reader_arguments_are_value_errors_naming_them(converted, call, message):
    out, _ = converted
    with pytest.raises(ValueError, match=message):
        call(str(out))


def test_distribute_checks_its_batch_size():
    from tfdata_reader import distribute

    with pytest.raises(ValueError, match="global_batch_size must be a whole number"):
        distribute(tf.distribute.get_strategy(), "nowhere", global_batch_size=64.0)
