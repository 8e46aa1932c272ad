"""Every format, the three reader cases: a missing file, an empty file, a corrupt file.

Each either fails with a `DataError` that names the file (exit code 1) or, where a single
record is at fault (an undecodable image), dead-letters it; none converts silently.
"""

from __future__ import annotations

import gzip
import os
import pathlib

import pytest
from support.datasets import convert
from support.inputs import write_input

from beam_jobs.core.errors import DataError, TooManyBadRecords
from beam_jobs.job import launcher

FORMATS = ["csv", "jsonl", "parquet", "text", "tfrecord", "images"]


def _one_file(path) -> str:
    """The input file itself (for images: one image of the folder)."""
    if path.is_dir():
        return str(sorted(p for p in path.rglob("*.png"))[0])
    return str(path)


@pytest.mark.parametrize("counted_by", ["launcher", "beam_stage"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_that_disappears_after_planning_is_a_data_error_naming_it(
    tmp_path, monkeypatch, fmt, counted_by
):
    from beam_jobs.transforms import convert_to_shards

    if counted_by == "beam_stage":  # as for inputs over 256 MiB or on gs://
        monkeypatch.setattr(convert_to_shards, "LAUNCHER_COUNT_BYTES", 0)
    path, flags = write_input(tmp_path / "in", fmt, rows=2000)
    flags = [*flags, "--num_shards=3"]  # cuts inside the file: counted before writing
    victim = _one_file(path)
    make_plan = launcher.make_plan

    def plan_then_delete(config):
        plan = make_plan(config)
        os.remove(victim)
        return plan

    monkeypatch.setattr(launcher, "make_plan", plan_then_delete)
    with pytest.raises(DataError) as e:
        convert([str(path)], tmp_path / "out", *flags)
    assert str(e.value).startswith(f"{victim}: the input file is gone")
    assert not (tmp_path / "out" / "manifest.json").exists()


def _change(path: str, how: str) -> None:
    file = pathlib.Path(path)
    data = file.read_bytes()
    if how == "append":  # the half-written last line of the plan's time, finished
        file.write_bytes(data + data[-200:])
    elif how == "truncate":
        file.write_bytes(data[: len(data) // 2])
    else:  # rewritten in place, same size
        with open(path, "r+b") as f:
            f.write(data[:10][::-1])
        stat = os.stat(path)
        os.utime(path, (stat.st_atime, stat.st_mtime + 5))


@pytest.mark.parametrize(
    "fmt, how",
    [(fmt, how) for fmt in FORMATS for how in ("append", "truncate")] + [("csv", "same_size")],
)
def test_a_file_that_changes_after_planning_is_a_data_error_naming_it(
    tmp_path, monkeypatch, fmt, how
):
    path, flags = write_input(tmp_path / "in", fmt, rows=2000)
    victim = _one_file(path)
    make_plan = launcher.make_plan

    def plan_then_change(config):
        plan = make_plan(config)
        _change(victim, how)
        return plan

    monkeypatch.setattr(launcher, "make_plan", plan_then_change)
    with pytest.raises(DataError) as e:
        convert([str(path)], tmp_path / "out", *flags, "--num_shards=3")
    assert str(e.value).startswith(f"{victim}: the input file changed while it was converted")
    assert "listed: " in str(e.value) and "; now: " in str(e.value)
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "text", "tfrecord"])
def test_an_empty_file_is_a_data_error_naming_it(tmp_path, fmt):
    path, flags = write_input(tmp_path / "in", fmt)
    empty = path.with_name("empty" + path.suffix)
    empty.write_bytes(b"")
    with pytest.raises(DataError, match=rf"1 input file\(s\) are empty \(0 bytes\): {empty}"):
        convert([str(path), str(empty)], tmp_path / "out", *flags)


def test_an_empty_image_is_dead_lettered(tmp_path):
    path, flags = write_input(tmp_path / "in", "images")
    (path / "c0" / "empty.png").write_bytes(b"")
    with pytest.raises(TooManyBadRecords):
        convert([str(path)], tmp_path / "out", *flags)
    manifest = convert([str(path)], tmp_path / "out2", *flags, "--max_bad_fraction=0.5")
    assert (manifest.total_records, manifest.counts.bad_records) == (10, 1)
    dead = (tmp_path / "out2" / manifest.dead_letter[0]).read_text()
    assert "empty.png" in dead and "not a decodable image" in dead


def _garbage(n: int = 5000) -> bytes:
    return bytes((i * 7919 + 13) % 256 for i in range(n))


@pytest.mark.parametrize(
    "fmt, message",
    [
        ("csv", r"holds NUL bytes \(UTF-16/32 text, or not text\)"),
        ("jsonl", r"holds NUL bytes \(UTF-16/32 text, or not text\)"),
        ("parquet", r"not a Parquet file"),
        ("tfrecord", r"no complete TFRecord record in the first"),
    ],
)
def test_a_file_that_is_not_of_its_format_is_a_data_error_naming_it(tmp_path, fmt, message):
    path, flags = write_input(tmp_path / "in", fmt)
    path.write_bytes(_garbage())
    with pytest.raises(DataError, match=rf"^{path}: .*{message}"):
        convert([str(path)], tmp_path / "out", *flags)


def test_json_lines_text_without_an_object_is_a_data_error_naming_it(tmp_path):
    path, flags = write_input(tmp_path / "in", "jsonl")
    path.write_text('3\n"text"\n[1, 2]\n')
    with pytest.raises(DataError, match=rf"^{path}: no JSON object among the sampled lines"):
        convert([str(path)], tmp_path / "out", *flags)


def test_a_corrupt_tfrecord_past_the_sample_names_the_file_and_offset(tmp_path):
    path, flags = write_input(tmp_path / "in", "tfrecord", rows=2000)
    data = bytearray(path.read_bytes())
    data[len(data) * 3 // 4] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(
        DataError, match=rf"^{path}: corrupt TFRecord file: record \d+ \(byte \d+\)"
    ):
        convert([str(path)], tmp_path / "out", *flags, "--sample_bytes=4096")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "text", "tfrecord"])
@pytest.mark.parametrize("cut", ["half", "last_byte"])
def test_a_truncated_gzip_input_is_a_data_error_naming_it(tmp_path, fmt, cut):
    path, flags = write_input(tmp_path / "in", fmt, rows=20000)
    packed = gzip.compress(path.read_bytes())
    gz = path.with_name(path.name + ".gz")
    gz.write_bytes(packed[: len(packed) // 2] if cut == "half" else packed[:-1])
    path.unlink()
    with pytest.raises(DataError, match=rf"^{gz}: the gzip stream ends before its end marker"):
        convert([str(gz)], tmp_path / "out", *flags, "--sample_bytes=4096")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_an_undecodable_image_is_dead_lettered_not_written(tmp_path):
    path, flags = write_input(tmp_path / "in", "images")
    (path / "c1" / "broken.png").write_bytes(_garbage())
    manifest = convert([str(path)], tmp_path / "out", *flags, "--max_bad_fraction=0.5")
    assert (manifest.total_records, manifest.counts.bad_records) == (10, 1)


def test_damaged_data_inside_a_parquet_row_group_names_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "a.parquet"
    table = pa.table({"id": list(range(20000)), "name": [f"name {i}" * 3 for i in range(20000)]})
    pq.write_table(table, path, row_group_size=5000, compression="snappy")
    data = bytearray(path.read_bytes())
    for offset in range(len(data) // 2, len(data) // 2 + 200):  # inside a middle row group
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"^{path}: cannot read row groups \d+-\d+: "):
        convert([str(path)], tmp_path / "out", "--target_shard_bytes=64KiB")


def test_a_zstd_bomb_is_read_in_bounded_memory(tmp_path):
    import subprocess
    import sys

    import zstandard

    bomb = tmp_path / "bomb.txt.zst"
    bomb.write_bytes(zstandard.ZstdCompressor(level=19).compress(b"0\n" * (128 << 20)))
    code = (
        "import resource, sys; from beam_jobs.formats.compressed import open_input, read_head;"
        "from beam_jobs.core.inputs import InputFile; p = sys.argv[1];"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
        "read_head(InputFile(p, 1), 1 << 20, 'zstd'); f = open_input(p, 'zstd');"
        "n = sum(len(c) for c in iter(lambda: f.read(8 << 20), b''));"
        "print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True)
    content, grown_kib = map(int, out.stdout.split())
    assert content == 256 << 20
    assert grown_kib < 64 * 1024, grown_kib  # 256 MiB of content, read through a few MiB


@pytest.mark.parametrize("fmt", ["text", "jsonl", "csv"])
def test_one_endless_line_in_a_small_gzip_stops_with_its_offset_not_memory(tmp_path, fmt):
    # A 1 MB .gz holding a head of good lines, then one 64 MiB line of NUL bytes: the readers
    # stop at twice --max_record_bytes, naming the file and where the line starts.
    head = {
        "text": b"".join(b"line %d\n" % i for i in range(2000)),
        "jsonl": b"".join(b'{"id": %d}\n' % i for i in range(2000)),
        "csv": b"id,x\n" + b"".join(b"%d,%d\n" % (i, i) for i in range(2000)),
    }[fmt]
    suffix = {"text": ".txt", "jsonl": ".jsonl", "csv": ".csv"}[fmt]
    bomb = tmp_path / f"bomb{suffix}.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(head)
        for _ in range(64):
            f.write(bytes(1 << 20))
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(DataError) as e:
        convert([str(bomb)], tmp_path / "out", "--max_record_bytes=1MiB", "--sample_bytes=4096")
    message = str(e.value)
    assert message.startswith(f"{bomb}: "), message
    assert f"the line starting at byte {len(head):,} is longer than 2,097,152 bytes" in message
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("data.csv", None, "a ZIP archive: unzip it first"),
        ("data.jsonl", None, "a ZIP archive: unzip it first"),
        ("data.csv", gzip.compress(b"a,b\n1,2\n"), "GZIP-compressed without a .gz name"),
        ("data.txt", b"PAR1\x00\x00", "a Parquet file: pass --format parquet"),
    ],
)
def test_a_file_that_is_no_text_says_what_it_is(tmp_path, name, data, says):
    import zipfile

    path = tmp_path / name
    if data is None:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("inner.csv", "a,b\n1,2\n")
    else:
        path.write_bytes(data)
    with pytest.raises(DataError, match=rf"{path}: the file is {says}"):
        convert([str(path)], tmp_path / "out")
