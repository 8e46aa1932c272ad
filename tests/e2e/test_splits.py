import numpy as np
import pyarrow as pa
import pytest
from support.datasets import convert

from beam_jobs.core.errors import UsageError
from beam_jobs.core.splits import Split, parse_splits
from beam_jobs.schema.split_hash import assign_splits


def test_assignment_depends_only_on_the_values():
    ids = list(range(10_000))
    whole = assign_splits(pa.RecordBatch.from_pydict({"id": ids}), [80, 20], "id")
    # The same rows in other batches, one of them with nulls, get the same splits.
    first = assign_splits(pa.RecordBatch.from_pydict({"id": [*ids[:3000], None]}), [80, 20], "id")
    second = assign_splits(pa.RecordBatch.from_pydict({"id": ids[3000:]}), [80, 20], "id")
    assert np.array_equal(np.concatenate([first[:-1], second]), whole)
    assert 0.78 < np.mean(whole == 0) < 0.82


def test_whole_record_hash_uses_every_column_and_three_splits():
    batch = pa.RecordBatch.from_pydict(
        {"a": [1, 1, 2] * 2000, "b": [b"x", b"y", b"x"] * 2000, "c": [[1.5], [], None] * 2000}
    )
    splits = assign_splits(batch, [1, 1, 2])
    assert set(np.unique(splits)) <= {0, 1, 2}
    # Identical rows land together; rows differing in one column may not.
    assert len(set(splits[0::3])) == 1 and len(set(splits[1::3])) == 1
    assert np.array_equal(splits, assign_splits(batch, [1, 1, 2]))


def test_parse_splits():
    assert parse_splits("train=80,eval=20") == (Split("train", 80), Split("eval", 20))
    for bad in ("train", "train=0", "a=1,a=2", "x y=3", "train=-1"):
        with pytest.raises(UsageError):
            parse_splits(bad)


def test_oversized_records_of_every_split_go_to_the_dead_letter(tmp_path):
    import json

    path = tmp_path / "in.jsonl"
    rows = [{"id": i, "s": "L" * 3000 if i % 100 == 7 else "ok"} for i in range(1000)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--splits=a=1,b=1", "--max_record_bytes=2000",
                       "--max_bad_fraction=0.5")  # fmt: skip
    assert manifest.counts.bad_records == 10 and manifest.total_records == 990
    dead = [json.loads(line) for name in manifest.dead_letter
            for line in (out / name).read_text().splitlines()]  # fmt: skip
    assert sorted(d["cells"]["id"] for d in dead) == [i for i in range(1000) if i % 100 == 7]


@pytest.mark.parametrize(
    "values, dtype",
    [
        ([1.0, None, float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 1e16, 1e-5, 3.0], "f4"),
        (list(np.random.default_rng(2).normal(size=3000) * 1e4), "f4"),
        (list(np.random.default_rng(3).normal(size=3000) * 1e30), "f8"),
        (
            list(
                np.random.default_rng(4).uniform(-10, 10, 20000)
                * 10.0 ** np.arange(-30, 30).repeat(334)[:20000]
            ),
            "f8",
        ),
        ([None, None], "f4"),
        ([float("nan"), None], "f4"),
        ([], "f4"),
    ],
)
def test_float_hashes_are_pandas_hashes_of_the_numbers_as_objects(values, dtype):
    # The rule datasets were split by: pandas' hash of the column as Python objects.
    from pandas.util import hash_array

    from beam_jobs.schema.split_hash import _column_hashes

    column = pa.array(values, pa.float32() if dtype == "f4" else pa.float64())
    expected = hash_array(np.asarray(column.to_pandas(), dtype=object), categorize=False)
    assert np.array_equal(_column_hashes(column), expected)


@pytest.mark.parametrize("other", [None, lambda numbers: [b"%.17g" % v for v in numbers]])
def test_float_texts_are_pythons_without_orjson_or_with_one_that_writes_otherwise(
    monkeypatch, other
):
    from beam_jobs.schema import split_hash

    numbers = np.random.default_rng(5).normal(size=5000) * 1e3
    monkeypatch.setattr(split_hash, "_orjson_texts", lambda values: other and other(values))
    assert split_hash.float_texts(numbers) == [repr(v).encode() for v in numbers.tolist()]


def _split_ids(out, manifest, compression="none") -> dict[str, list[int]]:
    import tensorflow as tf

    ids: dict[str, list[int]] = {}
    kind = "GZIP" if compression == "gzip" else ""
    for shard in manifest.shards:
        for record in tf.data.TFRecordDataset(str(out / shard.path), compression_type=kind):
            example = tf.train.Example.FromString(record.numpy())
            ids.setdefault(shard.split, []).append(
                example.features.feature["id"].int64_list.value[0]
            )
    return ids


# Which rows each split held when each split's writers read all input (the code before the
# parts were joined): a digest of each split's sorted ids.
SPLIT_DIGESTS = {
    "train": "5a4e32a6de0fc396",
    "eval": "13a408a5e96576e6",
    "test": "dc3264309f97599d",
}


def _split_input(tmp_path):
    import csv
    import random

    raw = tmp_path / "in.csv"
    rng = random.Random(17)
    with raw.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "x", "name", "n"])
        for i in range(6000):
            x = "" if i % 11 == 0 else f"{rng.uniform(-1e3, 1e3):.5f}"
            name = "" if i % 7 == 0 else rng.choice(["alpha", "beta", "gamma, delta", "é"])
            w.writerow([i, x, name + str(i % 13) if name else "", rng.randint(-5, 5)])
    return raw


def _digests(ids):
    import hashlib

    return {
        split: hashlib.sha256(",".join(map(str, sorted(v))).encode()).hexdigest()[:16]
        for split, v in ids.items()
    }


def test_each_row_is_read_once_and_the_splits_hold_what_they_held(tmp_path):
    import csv

    raw = _split_input(tmp_path)
    out = tmp_path / "out"
    manifest = convert(
        [str(raw)], out, "--splits=train=5,eval=2,test=1", "--target_shard_bytes=32KiB",
        "--order=input",
    )  # fmt: skip
    # Ten, four and two shards: the 12 write tasks lie between all their cuts, and most
    # shards are made of two or three tasks' parts.
    # What the splits and shards held when each split's writers read all input (the same
    # input converted by the code before this change): the same rows in the same shards.
    assert [(s.path, s.records) for s in manifest.shards] == [
        *(
            (f"train-{i:05d}-of-00010.tfrecord", n)
            for i, n in enumerate([402, 381, 368, 381, 367, 381, 380, 365, 374, 371])
        ),
        *((f"eval-{i:05d}-of-00004.tfrecord", n) for i, n in enumerate([410, 363, 362, 368])),
        *((f"test-{i:05d}-of-00002.tfrecord", n) for i, n in enumerate([361, 366])),
    ]
    assert manifest.fingerprint == (
        "sha256:1cea598ab9abddfd5ff85d29587c9845c8111116edafc872670236e73fd9b974"
    )
    ids = _split_ids(out, manifest)
    assert _digests(ids) == SPLIT_DIGESTS
    # Every row once (Python's csv module), read once: the counts say so too.
    with raw.open(newline="") as f:
        want = sorted(int(r["id"]) for r in csv.DictReader(f))
    assert sorted(i for v in ids.values() for i in v) == want
    assert manifest.counts.records_read == manifest.counts.records_written == 6000
    assert all(ids[s] == sorted(ids[s]) for s in ids)  # input order within each split


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_shuffled_conversion_keeps_each_splits_rows(tmp_path, compression):
    """The default order shuffles each split's rows, not which split a row goes to."""
    import csv

    raw = _split_input(tmp_path)
    out = tmp_path / "out"
    manifest = convert(
        [str(raw)], out, "--splits=train=5,eval=2,test=1", "--target_shard_bytes=32KiB",
        f"--compression={compression}",
    )  # fmt: skip
    assert manifest.order.shuffled
    ids = _split_ids(out, manifest, compression)
    assert _digests(ids) == SPLIT_DIGESTS
    assert [len(ids[s]) for s in ("train", "eval", "test")] == [3770, 1503, 727]
    with raw.open(newline="") as f:
        want = sorted(int(r["id"]) for r in csv.DictReader(f))
    assert sorted(i for v in ids.values() for i in v) == want
    assert all(ids[s] != sorted(ids[s]) for s in ids)  # no longer in input order
    sizes = {s: [x.records for x in manifest.shards if x.split == s] for s in ids}
    assert all(max(n) - min(n) <= 12 for n in sizes.values()), sizes  # balanced shards


def test_shards_are_sized_for_what_each_split_gets_not_its_weight(tmp_path):
    # A --split_key with three values, one of them in 80% of the rows: a split may get far
    # more (or less) than its weight says. Each split's shards are planned for the share the
    # sampled records give it, so every shard stays within the target.
    raw = tmp_path / "in.csv"
    keys = ["often"] * 8 + ["rare1", "rare2"]
    raw.write_text(
        "id,key,text\n" + "".join(f"{i},{keys[i % 10]},row {i} {'x' * 40}\n" for i in range(20_000))
    )
    target = 64 * 1024
    manifest = convert(
        [str(raw)], tmp_path / "out", "--splits=a=1,b=1,c=1", "--split_key=key",
        f"--target_shard_bytes={target}",
    )  # fmt: skip
    summary = manifest.split_summary()
    assert max(s["records"] for s in summary.values()) >= 16_000  # the skew is there
    for split in summary:
        sizes = [s.bytes for s in manifest.shards if s.split == split]
        assert max(sizes) <= 1.1 * target, (split, sizes)
        if summary[split]["records"]:  # a split no key value hashes to: one empty shard
            assert max(sizes) / min(sizes) <= 1.5, (split, sizes)
    assert manifest.total_records == 20_000


def test_the_sample_sizes_splits_only_when_it_surely_differs_from_the_weights():
    from beam_jobs.plan.measure import skewed

    weights = [0.98, 0.02]
    assert not skewed(np.array([1950.0, 50.0]), weights)  # 2.5% against 2%: sampling noise
    assert skewed(np.array([1800.0, 200.0]), weights)  # 10% against 2%
    assert not skewed(np.array([0.0, 0.0]), weights)  # nothing sampled


def test_a_shard_whose_parts_did_not_all_arrive_is_not_joined(tmp_path):
    from beam_jobs.core.errors import DataError
    from beam_jobs.core.inputs import InputFile
    from beam_jobs.core.tasks import WrittenShard
    from beam_jobs.plan.shards import plan_split_tasks
    from beam_jobs.sink.join_parts import join_parts, tasks_by_shard

    _, tasks = plan_split_tasks([InputFile("a", 1000)], [("train", 2), ("eval", 3)])
    expected = tasks_by_shard(tasks)
    # Cuts at 1/3, 1/2, 2/3: four tasks; train 0 is made of tasks 0 and 1, eval 1 of 1 and 2.
    assert expected == {
        ("train", 0): (0, 1), ("train", 1): (2, 3),
        ("eval", 0): (0,), ("eval", 1): (1, 2), ("eval", 2): (3,),
    }  # fmt: skip

    def part(task: int) -> WrittenShard:
        path = tmp_path / f"p{task}"
        path.write_bytes(b"x")
        return WrittenShard(0, str(path), "train-00000-of-00002.tfrecord", 1, 1, "0",
                            split="train", num_shards=2, part=task)  # fmt: skip

    with pytest.raises(DataError, match=r"write tasks \[0, 1\], but the parts of \[1\] arrived"):
        join_parts([part(1)], str(tmp_path), expected["train", 0])
    with pytest.raises(DataError, match=r"the parts of \[0, 1, 1\] arrived"):
        join_parts([part(0), part(1), part(1)], str(tmp_path), expected["train", 0])
    joined = join_parts([part(1), part(0)], str(tmp_path), expected["train", 0])
    assert (joined.records, joined.bytes) == (2, 2)


def test_a_split_that_gets_no_record_is_named_in_a_warning(tmp_path, caplog):
    # Two rows cannot fill three splits: the empty one would read as no batch at all.
    source = tmp_path / "in.csv"
    source.write_text("id,x\n1,a\n2,b\n")
    manifest = convert([str(source)], tmp_path / "out", "--splits", "train=1,eval=1,test=1")
    empty = [n for n, s in manifest.split_summary().items() if s["records"] == 0]
    assert len(empty) >= 1
    warned = sorted(r.getMessage() for r in caplog.records if "got no record" in r.getMessage())
    assert warned == sorted(
        f"split {name!r} got no record (weight 1 of 3, 2 records in all): reading it gives no "
        "batch; use fewer splits or more rows"
        for name in empty
    )
