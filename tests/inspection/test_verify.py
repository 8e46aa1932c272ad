"""`verify` names every kind of damage to a dataset, and its CLI exit codes."""

from __future__ import annotations

import os
import shutil

import google_crc32c
import pytest
from support.gzip_files import as_members, gzip_dataset

from beam_jobs.cli import main
from beam_jobs.inspection.verify import ShardProblem, verify


@pytest.fixture()
def dataset(converted, tmp_path):
    """A private copy of the converted sample, free to damage."""
    out, manifest = converted
    copy = tmp_path / "ds"
    shutil.copytree(out, copy)
    return copy, manifest


def _flip_bit(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x04
    path.write_bytes(bytes(data))


def test_bit_flip(dataset):
    out, manifest = dataset
    shard = manifest.shards[1]
    _flip_bit(out / shard.path, 1000)
    data = (out / shard.path).read_bytes()
    crc = google_crc32c.value(data)
    starts = [0]
    for _ in range(5):
        starts.append(starts[-1] + int.from_bytes(data[starts[-1] : starts[-1] + 8], "little") + 16)
    assert (
        starts[5]
        <= 1000
        < starts[5] + 12 + int.from_bytes(data[starts[5] : starts[5] + 8], "little")
    )
    assert verify(str(out))[1] == [
        ShardProblem(
            shard.path, f"bad record framing: record 5 (byte {starts[5]}): data fails its checksum"
        ),
        ShardProblem(shard.path, f"crc32c is {crc:08x}, manifest says {shard.crc32c}"),
    ]


def test_truncation_at_a_record_boundary(dataset):
    out, manifest = dataset
    import tensorflow as tf

    shard = manifest.shards[0]
    path = out / shard.path
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    keep = sum(len(r) + 16 for r in records[:-3])
    path.write_bytes(path.read_bytes()[:keep])
    crc = google_crc32c.value(path.read_bytes())
    assert [p.problem for p in verify(str(out))[1]] == [
        f"size is {keep} bytes, manifest says {shard.bytes}",
        f"crc32c is {crc:08x}, manifest says {shard.crc32c}",
        f"holds {shard.records - 3} records, manifest says {shard.records}",
    ]


def test_trailing_garbage_missing_and_extra_files(dataset):
    out, manifest = dataset
    with open(out / manifest.shards[0].path, "ab") as f:
        f.write(b"junk")
    os.remove(out / manifest.shards[2].path)
    shutil.copy(out / manifest.shards[3].path, out / "data-00099-of-00100.tfrecord")
    problems = verify(str(out))[1]
    by_path = {}
    for p in problems:
        by_path.setdefault(p.path, []).append(p.problem)
    assert (
        by_path[manifest.shards[0].path][0]
        == f"bad record framing: record {manifest.shards[0].records} (byte "
        f"{manifest.shards[0].bytes}): stream ends inside the record header"
    )
    assert by_path[manifest.shards[2].path] == ["missing"]
    assert by_path["data-00099-of-00100.tfrecord"] == ["not listed in the manifest"]
    assert set(by_path) == {
        manifest.shards[0].path,
        manifest.shards[2].path,
        "data-00099-of-00100.tfrecord",
    }


def test_cli_verify_exit_codes(dataset, capsys):
    out, manifest = dataset
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out == (
        f"verify ok: {len(manifest.shards)} shards, 12,000 records match {out}/manifest.json\n"
    )
    assert len(manifest.shards) > 1
    os.remove(out / manifest.shards[0].path)
    assert main(["verify", str(out)]) == 1
    assert capsys.readouterr().out == (
        f"BAD {manifest.shards[0].path}: missing\nverify failed: 1 bad file(s) in {out}\n"
    )


@pytest.mark.parametrize("bad", ["../outside.tfrecord", "/etc/passwd"])
def test_a_manifest_that_points_outside_its_folder_is_refused_everywhere(dataset, bad):
    import json

    from tfdata_reader import make_dataset
    from tfdata_reader.manifest import ManifestError

    out, _ = dataset
    (out.parent / "outside.tfrecord").write_bytes(b"not ours")
    obj = json.loads((out / "manifest.json").read_text())
    obj["shards"][0]["path"] = bad
    (out / "manifest.json").write_text(json.dumps(obj))
    message = "is not a plain relative path inside the dataset folder"
    with pytest.raises(ManifestError, match=message):
        verify(str(out))
    with pytest.raises(ManifestError, match=message):
        make_dataset(str(out), 8, skip_corrupt_shards=True)
    assert main(["verify", str(out)]) == 1


def test_counts_that_do_not_add_up_are_named(dataset):
    import json

    out, _ = dataset
    obj = json.loads((out / "manifest.json").read_text())
    obj["counts"]["records_read"] += 3
    (out / "manifest.json").write_text(json.dumps(obj))
    _, problems = verify(str(out))
    assert [(p.path, p.problem) for p in problems] == [
        (
            "manifest.json",
            "counts say 12,003 records were read but 12,000 written and 0 set aside: rows in "
            "!= rows out",
        )
    ]


def test_a_lease_and_a_publish_in_progress_are_not_damage(dataset):
    import json

    from beam_jobs.publish.lease import LEASE_NAME

    out, manifest = dataset
    next_gen = manifest.shards[0].path.replace(".tfrecord", f".g{manifest.generation + 1}.tfrecord")
    shutil.copy(out / manifest.shards[0].path, out / next_gen)
    # Without a lease, a next-generation shard is a leftover of a run that died publishing.
    assert verify(str(out))[1] == [ShardProblem(next_gen, "not listed in the manifest")]
    lease = {"run_id": "r", "host": "elsewhere", "pid": 1, "started": "2026-12-04T00:00:00+00:00",
             "expires": "2999-01-01T00:00:00+00:00", "job": ""}  # fmt: skip
    (out / LEASE_NAME).write_text(json.dumps(lease))  # a run holds the folder, publishing
    assert verify(str(out))[1] == []
    lease["expires"] = "2026-01-01T00:00:00+00:00"  # its holder is gone: a leftover again
    (out / LEASE_NAME).write_text(json.dumps(lease))
    assert verify(str(out))[1] == [ShardProblem(next_gen, "not listed in the manifest")]


def test_a_dataset_published_anew_while_verified_is_verified_against_the_new_manifest(
    dataset, monkeypatch
):
    import beam_jobs.inspection.verify as verify_module

    out, manifest = dataset
    old = manifest
    new_manifest = verify_module.load_manifest(str(out))
    calls = []

    def load(output):  # the first read sees a manifest whose shards are gone
        calls.append(output)
        if len(calls) == 1:
            return dataclasses.replace(old, shards=(*old.shards[:-1], gone))
        return new_manifest

    import dataclasses

    gone = dataclasses.replace(old.shards[-1], path="data-00000-of-00001.g9.tfrecord")
    monkeypatch.setattr(verify_module, "load_manifest", load)
    assert verify(str(out)) == (new_manifest, [])
    assert len(calls) == 3  # the first, its re-read, and the re-read after the second pass


def test_a_gzip_shard_of_several_members_is_named(tmp_path):
    # What shards joined from parts were before they were one member: TensorFlow's reader
    # stops at an empty member (here the first), and sometimes at a member's end.
    out, manifest = gzip_dataset(tmp_path)
    shard = as_members(out, manifest)
    assert verify(str(out))[1] == [
        ShardProblem(
            shard,
            "3 gzip members, 1 of them empty: TensorFlow's GZIP reader may read fewer records "
            "than it holds; convert it again (shards are now written as one member)",
        )
    ]


def test_a_cut_gzip_shard_cannot_be_decompressed(tmp_path):
    out, manifest = gzip_dataset(tmp_path)
    shard = manifest.shards[0]
    path = out / shard.path
    path.write_bytes(path.read_bytes()[:-5])
    problems = [p.problem for p in verify(str(out))[1]]
    assert problems[0] == "cannot decompress: the gzip stream ends before its end marker"
    assert problems[1] == f"size is {shard.bytes - 5} bytes, manifest says {shard.bytes}"
    assert main(["verify", str(out)]) == 1
    # Written whole, a shard is one member, and verifies.
    fresh, _ = gzip_dataset(tmp_path / "again")
    assert verify(str(fresh))[1] == []


def test_verify_of_one_shard_says_one_shard(tmp_path, capsys):
    from support.datasets import convert

    (tmp_path / "in.csv").write_text("id\n1\n2\n")
    out = tmp_path / "out"
    convert([str(tmp_path / "in.csv")], out)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out == f"verify ok: 1 shard, 2 records match {out}/manifest.json\n"
