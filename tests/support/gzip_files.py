"""Looking inside gzip files the way TensorFlow's reader would meet them."""

from __future__ import annotations

import zlib


def gzip_members(stored: bytes) -> int:
    """How many gzip members `stored` holds, one after the other (each must end)."""
    count = 0
    while stored:
        member = zlib.decompressobj(31)
        member.decompress(stored)
        assert member.eof, "a gzip member does not end"
        stored, count = member.unused_data, count + 1
    return count


def gzip_dataset(folder):
    """A small GZIP dataset converted into `folder` / "gz": (its folder, its manifest)."""
    from beam_jobs.cli import main
    from beam_jobs.publish.output_dir import load_manifest

    folder.mkdir(parents=True, exist_ok=True)
    csv = folder / "in.csv"
    csv.write_text("a,b\n" + "".join(f"{i},{i * 0.5}\n" for i in range(300)))
    out = folder / "gz"
    assert (
        main(["convert", "--input", str(csv), "--output", str(out), "--compression", "gzip"]) == 0
    )
    return out, load_manifest(str(out))


def as_members(out, manifest, index: int = 0):
    """Rewrites a shard as earlier versions joined parts: gzip members back to back, the
    first empty (where TensorFlow's reader stops), and lists it in the manifest as such."""
    import dataclasses
    import gzip

    import google_crc32c

    shard = manifest.shards[index]
    path = out / shard.path
    framed = gzip.decompress(path.read_bytes())
    members = gzip.compress(b"") + gzip.compress(framed[:100]) + gzip.compress(framed[100:])
    path.write_bytes(members)
    relisted = dataclasses.replace(
        shard, bytes=len(members), crc32c=f"{google_crc32c.value(members):08x}"
    )
    shards = list(manifest.shards)
    shards[index] = relisted
    (out / "manifest.json").write_text(dataclasses.replace(manifest, shards=shards).to_json())
    return shard.path
