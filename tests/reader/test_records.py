"""checked_blocks: every record range of a shard, read back exactly, and every damage named."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfdata_reader.records import BlockReading, checked_blocks

RECORDS = [f"record-{i:02d}".encode() * (1 + i % 3) for i in range(11)]
BLOCK = 4


def _write(path, records) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _read(
    path: str, start: int, stop: int, listed: int = len(RECORDS), seek=None
) -> list[list[bytes]]:
    ds = checked_blocks(
        tf.constant(path),
        *(tf.constant(v, tf.int64) for v in (start, stop, listed)),
        BlockReading("", BLOCK),
        seek=None if seek is None else tuple(tf.constant(v, tf.int64) for v in seek),
    )
    return [block.numpy().tolist() for block in ds]


def test_every_range_yields_exactly_its_records_in_blocks(tmp_path):
    path = _write(tmp_path / "shard", RECORDS)
    for start in range(len(RECORDS)):
        for stop in range(start + 1, len(RECORDS) + 1):
            blocks = _read(path, start, stop)
            assert blocks[-1] == [], (start, stop)  # the end marker
            assert [r for b in blocks for r in b] == RECORDS[start:stop], (start, stop)
            assert all(1 <= len(b) <= BLOCK for b in blocks[:-1]), (start, stop)


def _damaged(tmp_path, how: str) -> str:
    path = tmp_path / how
    if how == "truncated":  # cut at a record boundary: TF's reader sees a clean end of file
        _write(path, RECORDS[:-3])
    elif how == "extra":
        _write(path, RECORDS + RECORDS[:1])
    else:  # a flipped bit in record 6: its checksum fails
        _write(path, RECORDS)
        data = bytearray(path.read_bytes())
        offset = sum(len(r) + 16 for r in RECORDS[:6]) + 14
        data[offset] ^= 0x10
        path.write_bytes(bytes(data))
    return str(path)


@pytest.mark.parametrize("how", ["truncated", "extra", "bit_flip"])
@pytest.mark.parametrize("start", [0, 1, 4, 5])
def test_a_damaged_shard_read_to_its_end_names_the_file(tmp_path, how, start):
    path = _damaged(tmp_path, how)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        _read(path, start, len(RECORDS))
    assert f"[shard] [{path}] [does not hold the] [11] [records its manifest lists" in str(e.value)


@pytest.mark.parametrize("how", ["truncated", "extra"])
def test_damage_past_a_range_does_not_concern_it(tmp_path, how):
    path = _damaged(tmp_path, how)
    assert [r for b in _read(path, 2, 7) for r in b] == RECORDS[2:7]


def test_a_corrupt_record_inside_a_range_fails_it(tmp_path):
    path = _damaged(tmp_path, "bit_flip")
    assert [r for b in _read(path, 0, 6) for r in b] == RECORDS[:6]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"lists \(read\] \[5\]"):
        _read(path, 1, 8)


def test_the_check_runs_inline_on_this_tensorflow():
    # Without TF's private map dataset the check falls back to `Dataset.map`, correct but about
    # 100 us per block slower; a TF upgrade that moves it should fail here, not slow down quietly.
    from tfdata_reader import _compat

    assert _compat.HAS_INLINE_MAP
    ds = _compat.inline_map(tf.data.Dataset.range(3), lambda x: x * 2)
    assert type(ds).__name__ == "_MapDataset" and list(ds.as_numpy_iterator()) == [0, 2, 4]


@pytest.mark.parametrize("how", ["truncated", "bit_flip"])
def test_the_fallback_without_the_private_class_reads_and_checks_the_same(
    tmp_path, monkeypatch, how
):
    from tfdata_reader import _compat

    monkeypatch.setattr(_compat, "_MapDataset", None)
    path = _write(tmp_path / "shard", RECORDS)
    assert [r for b in _read(path, 3, 9) for r in b] == RECORDS[3:9]
    damaged = _damaged(tmp_path, how)
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not hold the"):
        _read(damaged, 0, len(RECORDS))


@pytest.mark.parametrize("start", [0, 4])
def test_a_missing_shard_fails_naming_it_instead_of_retrying_forever(tmp_path, start):
    # Run apart: TF's reader retrying a missing file spins in C++, past any Python timeout.
    import subprocess
    import sys

    path = tmp_path / "gone.tfrecord"
    code = (
        "import sys, tensorflow as tf\n"
        "from tfdata_reader.records import BlockReading, checked_blocks\n"
        "try:\n    list(checked_blocks(tf.constant(sys.argv[1]),\n"
        f"    *(tf.constant(v, tf.int64) for v in ({start}, 11, 11)), BlockReading('', 4)))\n"
        "except tf.errors.InvalidArgumentError as e:\n    print(e.message)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    assert f"[shard] [{path}] [is missing: its dataset was replaced or damaged" in done.stdout


def test_a_missing_shard_in_a_folder_with_glob_characters_is_named_too(tmp_path):
    folder = tmp_path / "runs[1]*?"
    folder.mkdir()
    present = _write(folder / "a.tfrecord", RECORDS)
    assert [r for b in _read(present, 0, 11) for r in b] == RECORDS
    import subprocess
    import sys

    gone = str(folder / "gone.tfrecord")
    code = (
        "import sys, tensorflow as tf\n"
        "from tfdata_reader.records import BlockReading, checked_blocks\n"
        "try:\n    list(checked_blocks(tf.constant(sys.argv[1]),\n"
        "    *(tf.constant(v, tf.int64) for v in (0, 11, 11)), BlockReading('', 4)))\n"
        "except tf.errors.InvalidArgumentError as e:\n    print(e.message)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, gone], capture_output=True, text=True, timeout=120
    )
    assert f"[shard] [{gone}] [is missing" in done.stdout


def test_a_range_read_from_a_seek_point_yields_the_same_records_and_checks(tmp_path):
    path = _write(tmp_path / "shard", RECORDS)
    starts = [0]
    for record in RECORDS[:-1]:
        starts.append(starts[-1] + 16 + len(record))  # framed: length, its CRC, data, CRC
    # Seek points at the start, inside and at the edges of a block (BLOCK records), the last.
    for point in (0, 1, BLOCK - 1, BLOCK, BLOCK + 1, len(RECORDS) - 1):
        seek = (point, starts[point])
        for start in range(point, len(RECORDS)):
            for stop in (start + 1, len(RECORDS)):
                blocks = _read(path, start, stop, seek=seek)
                assert [r for b in blocks for r in b] == RECORDS[start:stop], (seek, start, stop)
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not hold the"):
        _read(path, 3, len(RECORDS) + 1, listed=len(RECORDS) + 1, seek=(2, starts[2]))


def test_a_seek_point_off_a_record_start_fails_naming_the_shard(tmp_path):
    path = _write(tmp_path / "shard", RECORDS)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"shard.*{path}"):
        _read(path, 2, len(RECORDS), seek=(2, 7))
