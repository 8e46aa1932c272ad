"""The sink's Beam steps on literal inputs: the shard writer and publishing, each run as a Beam
piece (`TestPipeline` + `assert_that`), with exact expected values."""

from __future__ import annotations

import json
import pathlib

import apache_beam as beam
import google_crc32c
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from beam_jobs.codec.shard_file import ShardFileWriter
from beam_jobs.core.errors import TooManyBadRecords, recover
from beam_jobs.core.inputs import InputFile
from beam_jobs.core.tasks import WrittenShard
from beam_jobs.formats.csv.format import CsvFormat
from beam_jobs.formats.lines.cut_counts import CutCounts, count_segment, segments_between_cuts
from beam_jobs.plan.shards import cut_points, plan_shards, shard_tasks
from beam_jobs.publish.companions import COMPANION_NAMES
from beam_jobs.publish.publish import PublishShards, PublishSpec
from beam_jobs.sink.shard_writer import WriteShardFn, WriteSpec
from tfdata_reader.manifest import Counts, FeatureSpec

FEATURES = (FeatureSpec("id", "int64"), FeatureSpec("name", "bytes"))
LOCAL = PipelineOptions(["--runner=FnApiRunner", "--direct_running_mode=in_memory"])


def _crc(path: str) -> str:
    return f"{google_crc32c.value(pathlib.Path(path).read_bytes()):08x}"


def test_the_shard_writer_writes_each_planned_piece_exactly(tmp_path):
    # 30 rows; row 7's id is not an integer, and a name holds a quoted newline.
    lines = [f'{i},"n{i}\nx"' if i == 12 else f"{i},n{i}" for i in range(30)]
    lines[7] = "seven,n7"
    csv = tmp_path / "a.csv"
    csv.write_text("id,name\n" + "\n".join(lines) + "\n")
    shards = shard_tasks(plan_shards([InputFile(str(csv), csv.stat().st_size)], 3))
    counts = CutCounts.from_counted(
        count_segment(s) for s in segments_between_cuts(cut_points(shards))
    )
    writer = WriteShardFn(
        WriteSpec(
            CsvFormat(), tuple(FEATURES), tuple(FEATURES), str(tmp_path / ".tfrecord-etl-tmp-0a1b")
        )
    )

    def check(written: list[WrittenShard]) -> None:
        written = sorted(written, key=lambda w: w.index)
        assert [w.name for w in written] == [f"data-0000{i}-of-00003.tfrecord" for i in range(3)]
        assert sum(w.records for w in written) == 29
        assert [w.bad_records for w in written] == [1, 0, 0]
        assert sum(w.counts.input_bytes_read for w in written) == csv.stat().st_size
        for w in written:
            assert (w.bytes, w.crc32c) == (
                pathlib.Path(w.temp_path).stat().st_size,
                _crc(w.temp_path),
            )
        dead = pathlib.Path(written[0].dead_letter_temp_path).read_text().splitlines()
        assert [(row["line"], row["cells"]) for row in map(json.loads, dead)] == [
            (9, {"id": "seven", "name": "n7"})
        ]
        assert json.loads(dead[0])["reason"].startswith("column 'id' (int64)")

    with test_pipeline.TestPipeline(options=LOCAL) as p:
        written = p | beam.Create(shards) | beam.ParDo(writer, cut_counts=counts)
        assert_that(written, check)


def _written(tmp_path, index: int, records: list[bytes], bad: int = 0) -> WrittenShard:
    path = tmp_path / "tmp" / f"shard{index}"
    path.parent.mkdir(exist_ok=True)
    with ShardFileWriter(open(path, "wb"), "none") as writer:
        writer.write_records(records)
    name = f"data-{index:05d}-of-00002.tfrecord"
    counts = Counts(
        records_read=len(records) + bad, bad_records=bad, input_bytes_read=100,
        missing_values={"id": 0, "name": index},
    )  # fmt: skip
    return WrittenShard(
        index, str(path), name, writer.records, writer.bytes, writer.crc32c, counts, num_shards=2
    )


def _spec(tmp_path, max_bad_fraction: float = 0.0) -> PublishSpec:
    return PublishSpec(
        output=str(tmp_path / "out"),
        temp_dir=str(tmp_path / "tmp"),
        prefixes=("data",),
        max_bad_fraction=max_bad_fraction,
        compression="none",
        inputs={"source": "test"},
        options={"o": 1},
        features=FEATURES,
    )


def test_publishing_renames_the_shards_and_writes_their_manifest(tmp_path):
    written = [_written(tmp_path, 1, [b"c"]), _written(tmp_path, 0, [b"a", b"bb"])]
    (tmp_path / "out").mkdir()

    def summary(manifest):
        return (
            [(s.path, s.records, s.bytes, s.crc32c) for s in manifest.shards],
            manifest.counts.to_json(),
            [(f.name, f.nullable) for f in manifest.features],
        )

    expected = (
        [
            ("data-00000-of-00002.tfrecord", 2, 35, _crc(written[1].temp_path)),
            ("data-00001-of-00002.tfrecord", 1, 17, _crc(written[0].temp_path)),
        ],
        {
            "records_read": 3,
            "records_written": 3,
            "bad_records": 0,
            "input_bytes_read": 200,
            "missing_values": {"id": 0, "name": 1},
        },
        [("id", False), ("name", True)],
    )
    with test_pipeline.TestPipeline(options=LOCAL) as p:
        manifests = p | beam.Create(written) | PublishShards(_spec(tmp_path))
        assert_that(manifests | beam.Map(summary), equal_to([expected]))
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["data-00000-of-00002.tfrecord", "data-00001-of-00002.tfrecord", "manifest.json",
         *COMPANION_NAMES]
    )  # fmt: skip
    assert not (tmp_path / "tmp").exists()


def test_publishing_refuses_a_missing_shard_and_too_many_bad_rows(tmp_path):
    (tmp_path / "out").mkdir()
    missing_first = [_written(tmp_path, 1, [b"c"])]
    with (
        pytest.raises(Exception, match=r"refusing to publish: shard indexes \[1\]"),
        test_pipeline.TestPipeline(options=LOCAL) as p,
    ):
        _ = p | beam.Create(missing_first) | PublishShards(_spec(tmp_path))
    written = [_written(tmp_path, 0, [b"a"], bad=1), _written(tmp_path, 1, [b"c"])]
    with pytest.raises(Exception) as raised, test_pipeline.TestPipeline(options=LOCAL) as p:
        _ = p | beam.Create(written) | PublishShards(_spec(tmp_path, 0.2))
    error = recover(raised.value)
    assert isinstance(error, TooManyBadRecords)
    assert error.message.startswith("1 of 3 records (33.333%) could not be converted")
    assert error.output == str(tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()
