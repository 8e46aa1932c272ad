import gzip
import io

import pytest
from support.gzip_files import gzip_members

from beam_jobs.codec.framing import count_records, frame_records, masked_crc32c
from beam_jobs.codec.shard_file import ShardFileWriter
from beam_jobs.core.errors import FramingError

RECORDS = [b"", b"a", b"hello world" * 50, bytes(range(256))]


def test_masked_crc32c_known_values():
    # CRC32C("123456789") is the standard check value 0xE3069283; masked by hand.
    assert masked_crc32c(b"") == 0xA282EAD8
    assert masked_crc32c(b"123456789") == 0xC78AB0E5


def test_frame_records_matches_tensorflow_writer(tmp_path):
    tf = pytest.importorskip("tensorflow")
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in RECORDS:
            w.write(r)
    with open(path, "rb") as f:
        assert frame_records(RECORDS) == f.read()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_shard_file_writer_measures_stored_bytes(compression):
    import google_crc32c

    raw = io.BytesIO()
    raw.close = lambda: None  # keep the buffer readable after the writer closes it
    with ShardFileWriter(raw, compression) as w:
        w.write_records(RECORDS[:2])
        w.write_records(RECORDS[2:])
    stored = raw.getvalue()
    assert w.records == 4
    assert w.bytes == len(stored)
    assert w.crc32c == f"{google_crc32c.value(stored):08x}"
    framed = gzip.decompress(stored) if compression == "gzip" else stored
    assert framed == frame_records(RECORDS)


@pytest.mark.parametrize("level", [1, 6])
def test_a_gzip_shards_bytes_do_not_depend_on_how_records_are_batched(level):
    import random

    rng = random.Random(4)
    records = [rng.randbytes(rng.randrange(2000)) for _ in range(3000)]  # about 3 MB framed

    def stored(cuts: list[int]) -> bytes:
        raw = io.BytesIO()
        raw.close = lambda: None
        with ShardFileWriter(raw, "gzip", level) as w:
            for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True):
                w.write_records(records[a:b])
        return raw.getvalue()

    one = stored([])
    assert stored([1, 500, 501, 2999]) == one
    assert stored(list(range(7, 3000, 7))) == one
    assert gzip.decompress(one) == frame_records(records)


@pytest.mark.parametrize("level", [1, 6])
def test_tensorflow_reads_our_gzip_shard(tmp_path, level):
    import random

    tf = pytest.importorskip("tensorflow")
    rng = random.Random(level)
    records = [*RECORDS, *(rng.randbytes(rng.randrange(3000)) for _ in range(2000))]
    path = tmp_path / "x.tfrecord.gz"
    with ShardFileWriter(open(path, "wb"), "gzip", level) as w:
        w.write_records(records)
    stored = path.read_bytes()
    assert gzip_members(stored) == 1  # 2.9 MiB framed, fed a MiB at a time: one member
    got = [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type="GZIP")]
    assert got == records


@pytest.mark.parametrize("level", [1, 4, 6, 9])
def test_an_empty_gzip_shard_is_one_empty_member(tmp_path, level):
    tf = pytest.importorskip("tensorflow")
    path = tmp_path / "empty.tfrecord.gz"
    with ShardFileWriter(open(path, "wb"), "gzip", level) as w:
        w.write_records([])
    assert gzip.decompress(path.read_bytes()) == b""
    assert list(tf.data.TFRecordDataset(str(path), compression_type="GZIP")) == []


def test_each_gzip_level_has_its_library():
    from beam_jobs.codec.deflate import engine

    assert [engine(level) for level in range(1, 10)] == ["isal"] * 3 + ["zlib"] * 6


def test_count_records_walks_and_checks():
    data = frame_records(RECORDS)
    assert count_records(io.BytesIO(data)) == 4
    assert count_records(io.BytesIO(b"")) == 0


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d[:-1], r"record 3 \(byte 599\): stream ends inside the record data"),
        (lambda d: d + b"\x01\x02", r"record 4 \(byte 871\): stream ends inside the record header"),
        (
            lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:],
            r"record 1 \(byte 16\): length field fails its checksum",
        ),
        (
            lambda d: d[:-5] + bytes([d[-5] ^ 0x10]) + d[-4:],
            r"record 3 \(byte 599\): data fails its checksum",
        ),
    ],
)
def test_count_records_names_the_bad_record(mutate, message):
    with pytest.raises(FramingError, match=message):
        count_records(io.BytesIO(mutate(frame_records(RECORDS))))
