"""Which records each input pipeline reads, so that every record is read exactly once.

Pure arithmetic on the manifest's per-shard record counts. With at least as many shards as input
pipelines, pipeline i reads whole shards i, i+n, i+2n...: no shard is opened twice. With fewer
shards, the records (all shards end to end) are cut into n contiguous ranges of equal count and
each pipeline reads its range as per-shard [start, stop) record ranges, like TFDS's subsplits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

__all__ = ["BY_FILE", "BY_RECORD", "FileRange", "plan_reads"]

BY_FILE = "file"
BY_RECORD = "record"


@dataclasses.dataclass(frozen=True)
class FileRange:
    """Records [start, stop) of shard `shard_index`, which holds `shard_records` records."""

    shard_index: int
    start: int
    stop: int
    shard_records: int

    @property
    def records(self) -> int:
        return self.stop - self.start


def plan_reads(
    shard_records: Sequence[int], num_pipelines: int, pipeline_id: int
) -> tuple[str, list[FileRange]]:
    """The record ranges input pipeline `pipeline_id` of `num_pipelines` reads.

    Args:
      shard_records: the record count of every shard, in manifest order.
      num_pipelines: how many input pipelines share the data (at least 1).
      pipeline_id: this pipeline, in [0, num_pipelines).

    Returns:
      (BY_FILE or BY_RECORD, the ranges in shard order). Over all pipelines the ranges cover
      every record of every shard exactly once.
    """
    if num_pipelines < 1 or not 0 <= pipeline_id < num_pipelines:
        raise ValueError(
            f"pipeline_id must be in [0, {num_pipelines}) with num_pipelines >= 1, "
            f"got pipeline {pipeline_id} of {num_pipelines}"
        )
    if len(shard_records) >= num_pipelines:
        return BY_FILE, [
            FileRange(i, 0, shard_records[i], shard_records[i])
            for i in range(pipeline_id, len(shard_records), num_pipelines)
        ]
    total = sum(shard_records)
    lo = total * pipeline_id // num_pipelines
    hi = total * (pipeline_id + 1) // num_pipelines
    ranges, base = [], 0
    for index, count in enumerate(shard_records):
        start, stop = max(lo, base) - base, min(hi, base + count) - base
        if stop > start:
            ranges.append(FileRange(index, start, stop, count))
        base += count
    return BY_RECORD, ranges
