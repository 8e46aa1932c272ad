"""`diff A B`: the same records whatever their storage (exit 0), or the first difference (1)."""

from __future__ import annotations

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
        "same records, stored differently: compression none against gzip, 3 shards against 2, "
        f"{_bytes(tmp_path / 'a')} bytes against {_bytes(tmp_path / 'b')}\n"
    )
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert capsys.readouterr().out.startswith("same records, same bytes (sha256:")


def test_the_first_different_value_is_named(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 5000)], tmp_path / "a", "--num_shards=3")
    convert([_csv(tmp_path / "e.csv", 5000, {3333: "CHANGED"})], tmp_path / "b", "--num_shards=1")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    first = _first_shard_records(tmp_path / "a")
    shard, index = ("data-00001-of-00003.tfrecord", 3333 - first) if first <= 3333 else (
        "data-00000-of-00003.tfrecord", 3333)  # fmt: skip
    assert capsys.readouterr().out == (
        f"record 3,333 ({shard}, record {index:,} of that shard), feature 'name': "
        "A [b'n3333'], B [b'CHANGED']\n"
    )


def test_a_dataset_with_more_records_or_other_features_differs(tmp_path, capsys):
    convert([_csv(tmp_path / "d.csv", 100)], tmp_path / "a")
    convert([_csv(tmp_path / "e.csv", 101)], tmp_path / "b")
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

    from beam_jobs.diff import _storage
    from tfdata_reader.manifest import FeatureSpec, Manifest, ShardInfo

    a = Manifest([ShardInfo("data-00000-of-00001.tfrecord", 3, 100, "0000abcd")],
                 [FeatureSpec("id", "int64")], "none")  # fmt: skip
    b = dataclasses.replace(a, shards=[dataclasses.replace(a.shards[0], crc32c="0000abce")])
    assert _storage(a, b) == (
        "the same layout, other bytes (the order of features inside the Examples)"
    )
