"""`diff A B`: the same records whatever their storage (exit 0), or the first difference (1)."""

from __future__ import annotations

import re

from support.datasets import convert

from beam_jobs.cli import main


def _csv(path, rows: int, change: dict[int, str] | None = None):
    change = change or {}
    lines = ["id,x,name"] + [f"{i},{i * 0.5},{change.get(i, f'n{i}')}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_the_same_records_stored_differently_are_the_same(tmp_path, capsys):
    source = _csv(tmp_path / "d.csv", 5000)
    convert([source], tmp_path / "a", "--num_shards=3")
    convert([source], tmp_path / "b", "--num_shards=2", "--compression=gzip")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert capsys.readouterr().out == (
        "same records (compared as sets: one is shuffled), stored differently: compression "
        f"none against gzip, 3 shards against 2, {_bytes(tmp_path / 'a')} bytes against "
        f"{_bytes(tmp_path / 'b')}\n"
    )
    convert([source], tmp_path / "c", "--num_shards=3", "--order=input")
    convert([source], tmp_path / "d", "--num_shards=2", "--order=input")
    assert main(["diff", str(tmp_path / "c"), str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.startswith("same records, stored differently: 3 shards")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert capsys.readouterr().out.startswith("same fingerprint (sha256:")


def test_the_first_different_value_is_named(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 5000)], tmp_path / "a", "--num_shards=3", "--order=input")
    convert([_csv(tmp_path / "e.csv", 5000, {3333: "CHANGED"})], tmp_path / "b", "--num_shards=1",
            "--order=input")  # fmt: skip
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    first = _first_shard_records(tmp_path / "a")
    shard, index = ("data-00001-of-00003.tfrecord", 3333 - first) if first <= 3333 else (
        "data-00000-of-00003.tfrecord", 3333)  # fmt: skip
    assert capsys.readouterr().out == (
        f"record 3,333 ({shard}, record {index:,} of that shard), feature 'name': "
        "A [b'n3333'], B [b'CHANGED']\n"
    )


def test_a_dataset_with_more_records_or_other_features_differs(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 100)], tmp_path / "a", "--order=input")
    convert([_csv(tmp_path / "e.csv", 101)], tmp_path / "b", "--order=input")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().out == ("A holds 100 records, B 101: B goes on after record 100\n")
    convert([str(tmp_path / "d.csv")], tmp_path / "c", "--columns=id,x")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "c")]) == 1
    assert capsys.readouterr().out == (
        "the features differ: ['id', 'x', 'name'] against ['id', 'x']\n"
    )


def _bytes(folder) -> str:
    import json

    manifest = json.loads((folder / "manifest.json").read_text())
    return f"{sum(s['bytes'] for s in manifest['shards']):,}"


def _first_shard_records(folder) -> int:
    import json

    return json.loads((folder / "manifest.json").read_text())["shards"][0]["records"]


def test_the_same_layout_with_other_bytes_is_named_whole():
    import dataclasses

    from beam_jobs.inspection.diff import _storage
    from tfdata_reader.manifest import FeatureSpec, Manifest, ShardInfo

    a = Manifest([ShardInfo("data-00000-of-00001.tfrecord", 3, 100, "0000abcd")],
                 [FeatureSpec("id", "int64")], "none")  # fmt: skip
    b = dataclasses.replace(a, shards=[dataclasses.replace(a.shards[0], crc32c="0000abce")])
    assert _storage(a, b) == (
        "the same layout, other bytes (the same values encoded differently, e.g. by an earlier "
        "version with another order of features inside the Examples)"
    )


def test_the_earliest_record_that_differs_is_named_whatever_the_feature(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 20)], tmp_path / "a", "--order=input")
    lines = (tmp_path / "d.csv").read_text().splitlines()
    lines[3] = "2,7.25,n2"  # record 2's x; record 9's name, a feature that comes first by name
    lines[10] = "9,4.5,CHANGED"
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    convert([str(tmp_path / "e.csv")], tmp_path / "b", "--order=input")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().out == (
        "record 2 (data-00000-of-00001.tfrecord, record 2 of that shard), feature 'x': "
        "A [1.0], B [7.25]\n"
    )


def test_another_spec_label_vocabulary_or_sign_of_zero_differs(tmp_path, capsys):
    (tmp_path / "s.json").write_text('{"features": [{"name": "id", "dtype": "float32"}]}')
    source = _csv(tmp_path / "d.csv", 10)
    convert([source], tmp_path / "a")
    convert([source], tmp_path / "b", f"--schema={tmp_path / 's.json'}")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().out.startswith(
        'feature \'id\' differs: A {"name": "id", "dtype": "int64"'
    )
    (tmp_path / "z.csv").write_text("v\n0.0\n")
    (tmp_path / "m.csv").write_text("v\n-0.0\n")
    convert([str(tmp_path / "z.csv")], tmp_path / "z")
    convert([str(tmp_path / "m.csv")], tmp_path / "m")
    assert main(["diff", str(tmp_path / "z"), str(tmp_path / "m")]) == 1
    assert capsys.readouterr().out.endswith(": {'v': [0.0]}\n")  # shuffled: compared as sets
    convert([str(tmp_path / "z.csv")], tmp_path / "zi", "--order=input")
    convert([str(tmp_path / "m.csv")], tmp_path / "mi", "--order=input")
    assert main(["diff", str(tmp_path / "zi"), str(tmp_path / "mi")]) == 1
    assert "feature 'v': A [0.0], B [-0.0]" in capsys.readouterr().out
    labels = tmp_path / "l.csv"
    labels.write_text("id,kind\n1,cat\n2,dog\n")
    convert([str(labels)], tmp_path / "l1", "--label=kind")
    labels.write_text("id,kind\n1,ant\n2,bee\n")
    convert([str(labels)], tmp_path / "l2", "--label=kind")
    assert main(["diff", str(tmp_path / "l1"), str(tmp_path / "l2")]) == 1
    assert capsys.readouterr().out == (
        "the label vocabulary differs: A ['cat', 'dog'], B ['ant', 'bee']\n"
    )


def test_a_dataset_that_cannot_be_read_is_exit_2_not_a_difference(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 10)], tmp_path / "a", "--num_shards=2")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "nothing")]) == 2
    assert "error: cannot compare" in capsys.readouterr().err
    convert([_csv(tmp_path / "e.csv", 11)], tmp_path / "b", "--num_shards=2")
    (tmp_path / "b" / "data-00001-of-00002.tfrecord").unlink()
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "data-00001-of-00002.tfrecord" in capsys.readouterr().err


def test_shuffled_datasets_compare_as_sets_and_name_a_record_one_side_lacks(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 3000)], tmp_path / "a", "--num_shards=3")
    convert([_csv(tmp_path / "e.csv", 3000, {1234: "CHANGED"})], tmp_path / "b",
            "--num_shards=2", "--shuffle_seed=9")  # fmt: skip
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    # The changed row beside the record of B it became, named by the feature that differs.
    assert re.fullmatch(
        r"A holds a record B does not: record [\d,]+ of A \(data-0000\d-of-00003\.tfrecord, "
        r"record [\d,]+ of that shard\); the closest record B holds and A does not, record "
        r"[\d,]+ of B \(data-0000\d-of-00002\.tfrecord, record [\d,]+\), differs in feature "
        r"'name': A \[b'n1234'\], B \[b'CHANGED'\]\n",
        out,
    ), out
    # The same rows twice in A, once each in B with one row twice: a multiset differs.
    (tmp_path / "f.csv").write_text("id\n1\n1\n2\n")
    (tmp_path / "g.csv").write_text("id\n1\n2\n2\n")
    convert([str(tmp_path / "f.csv")], tmp_path / "f")
    convert([str(tmp_path / "g.csv")], tmp_path / "g")
    assert main(["diff", str(tmp_path / "f"), str(tmp_path / "g")]) == 1
    assert capsys.readouterr().out.endswith("{'id': [1]}\n")
