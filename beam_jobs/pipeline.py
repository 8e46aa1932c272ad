"""The conversion pipeline: planned CSV byte ranges in, published shards and manifest out."""

from __future__ import annotations

import uuid
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs import shard_writer
from beam_jobs.options import ConvertConfig
from beam_jobs.output_dir import TEMP_DIR_PREFIX
from beam_jobs.planning import ConversionPlan
from beam_jobs.publish import publish
from beam_jobs.shard_plan import cut_points

__all__ = ["ConvertCsvToShards"]


class ConvertCsvToShards(beam.PTransform):
    """Writes the shards of a `ConversionPlan` and publishes their manifest.

    Output: a PCollection with the published `Manifest` as its single element.
    """

    def __init__(self, plan: ConversionPlan, config: ConvertConfig, tool_version: str) -> None:
        super().__init__()
        self._plan = plan
        self._config = config
        self._tool_version = tool_version
        self.temp_dir = FileSystems.join(config.output, TEMP_DIR_PREFIX + uuid.uuid4().hex[:12])

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        plan, config = self._plan, self._config
        # {path: {cut offset: quotes before it}}: where each writer's first record starts.
        quotes = (
            pbegin
            | "ListSegments" >> beam.Create(shard_writer.quote_segments(cut_points(plan.shards)))
            | "SpreadSegments" >> beam.Reshuffle()
            | "CountQuotes" >> beam.Map(shard_writer.count_segment_quotes)
            | "GatherCounts" >> beam.combiners.ToList()
            | "QuotesBeforeCuts" >> beam.Map(shard_writer.quotes_before_cuts)
        )
        # One WrittenShard per planned shard, under a temporary name.
        written = (
            pbegin
            | "ListShards" >> beam.Create(plan.shards)
            | "SpreadShards" >> beam.Reshuffle()
            | "WriteShards"
            >> beam.ParDo(
                shard_writer.WriteShardFn(
                    plan.features,
                    self.temp_dir,
                    config.shard_prefix,
                    config.compression,
                    config.max_record_bytes,
                ),
                quotes=beam.pvalue.AsSingleton(quotes),
            )
        )
        return (
            written
            | "GatherShards" >> beam.combiners.ToList()
            | "Publish"
            >> beam.Map(
                publish,
                output=config.output,
                temp_dir=self.temp_dir,
                prefix=config.shard_prefix,
                max_bad_fraction=config.max_bad_fraction,
                features=plan.features,
                compression=config.compression,
                inputs=self._inputs(),
                options=self._options(),
                tool_version=self._tool_version,
            )
        )

    def _inputs(self) -> dict[str, Any]:
        return {
            "patterns": list(self._config.inputs),
            "files": [{"path": f.path, "bytes": f.size} for f in self._plan.files],
            "total_bytes": self._plan.input_bytes,
        }

    def _options(self) -> dict[str, Any]:
        return self._config.to_json() | {
            "planned_shards": len(self._plan.shards),
            "estimated_output_bytes_per_input_byte": round(
                self._plan.output_bytes_per_input_byte, 6
            ),
        }
