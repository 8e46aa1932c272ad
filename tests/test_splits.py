import numpy as np
import pyarrow as pa
import pytest
from support.datasets import convert

from beam_jobs.errors import UsageError
from beam_jobs.options import parse_splits
from beam_jobs.schema.splits import assign_splits


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
    assert parse_splits("train=80,eval=20") == (("train", 80), ("eval", 20))
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
    assert manifest.counts["bad_records"] == 10 and manifest.total_records == 990
    dead = [json.loads(line) for name in manifest.dead_letter
            for line in (out / name).read_text().splitlines()]  # fmt: skip
    assert sorted(d["cells"]["id"] for d in dead) == [i for i in range(1000) if i % 100 == 7]
