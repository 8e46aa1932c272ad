"""`WriteShards`: balanced, size-targeted shards and a manifest from any PCollection.

For teams with their own Beam pipeline: the elements may be dicts (`{feature: value or list}`,
nested dicts flattened to dotted names), Arrow `RecordBatch`es, or serialized `tf.train.Example`
bytes. The feature spec is given or inferred from a sample; elements are batched, conformed and
encoded, each Example's features in the spec's order; the total size decides the shard count;
each record goes to the shard that has the fewest bytes so far in its bundle; every shard is
written under a temporary name and published by the same `PublishShards` step as `convert`.
Rows that contradict the spec go to the dead letter, and `max_bad_fraction` applies, as in
`convert`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError
from beam_jobs.core.paths import worker_path
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.units import count_of
from beam_jobs.publish.publish import PublishShards, PublishSpec
from beam_jobs.sink.elements import EncodeElementsFn, infer_spec
from beam_jobs.sink.grouped import PickShardFn, WriteGroupFn, every_index, framed_size, shard_count
from beam_jobs.sink.temp_folder import TEMP_DIR_PREFIX
from beam_jobs.transforms import local_runner_fix
from tfdata_reader.manifest import FeatureSpec, Manifest, Order, RecordOrder

__all__ = ["WriteShards"]

SAMPLE_SIZE = 1000
_log = logging.getLogger(__name__)


class WriteShards(beam.PTransform[Any, Any]):
    """Writes a PCollection as size-targeted TFRecord shards plus `manifest.json`.

    Example:
        rows | WriteShards("gs://bucket/ds", target_shard_bytes="256MiB", compression="gzip")

    Args:
      output_dir: where the shards, `dead_letter/` and `manifest.json` go (local or gs://).
      features: the feature spec; default: inferred from a sample of `sample_size` elements.
      sample_size: elements sampled to infer the spec.
      **options: the sharding flags of `convert`, with the same names and values (text as
        on the command line, or Python values): `target_shard_bytes` (an int or "256MiB";
        sized on the uncompressed records, so GZIP shards come out smaller), `num_shards`,
        `compression` ("none", "gzip" or a `Compression`), `compression_level` (1-9),
        `shard_prefix`, `max_bad_fraction`.

    Raises:
      UsageError: for a bad argument, at construction.

    Output: a PCollection holding the published `Manifest`.

    Order: by default (`order="shuffled"`) each shard's records are ordered by a hash of their
    bytes and `shuffle_seed`, so that reading is random whatever order the elements came in
    (each bundle deals its records round the shards); a shard is then held in one worker's
    memory while it is written. `order="input"` writes them as the runner hands them over.

    Determinism: with the same feature spec, an element becomes the same Example bytes in every
    run, process and runner, so two runs over the same elements publish the same records. A
    PCollection has no order, though: which shard holds a record follows the runner's
    bundles, so shard files may differ in bytes from run to run. Pass `features` for a fixed
    spec (an inferred one comes from a random sample). `convert`, which reads its inputs in a
    fixed order, writes byte-identical shards.
    """

    def __init__(
        self,
        output_dir: str,
        *,
        features: Sequence[FeatureSpec] | None = None,
        sample_size: int = SAMPLE_SIZE,
        **options: Any,
    ) -> None:
        super().__init__()
        # The same flags, values and checks as `convert`'s (named as flags in the messages).
        try:
            flags.check_keywords(ShardingOptions, options, "WriteShards()")
            self._sharding = ShardingOptions(**flags.values(ShardingOptions, options))
        except UsageError as e:
            raise UsageError(f"WriteShards: {e}") from None
        self._output = worker_path(output_dir.rstrip("/"))
        self._features = tuple(features) if features else None
        self._sample_size = sample_size
        self._temp_dir = FileSystems.join(self._output, TEMP_DIR_PREFIX + uuid.uuid4().hex[:12])

    def expand(self, pcoll: beam.PCollection[Any]) -> beam.PCollection[Any]:
        # Many elements cross stage boundaries here: on Beam 2.77's local runner in
        # multi_threading mode that loses elements unless this fix is in (harmless elsewhere).
        local_runner_fix.apply()
        # Beam codes a PCollection by the type it inferred for it: dicts of ints by a 64-bit
        # integer coder, which fails on an integer past int64 with a trace from inside this
        # transform. Its general coder holds any element; such a value then becomes a dead
        # letter that names its key, as in `convert`.
        pcoll.element_type = Any
        spec = self._spec(pcoll)  # None when the features were given
        encoded = (
            pcoll
            | "Batch" >> beam.BatchElements(min_batch_size=64, max_batch_size=4096)
            # Serialized Examples; tagged: bad rows' dead-letter objects, per-batch tallies.
            | "Encode"
            >> beam.ParDo(EncodeElementsFn(self._features), spec=spec).with_outputs(
                EncodeElementsFn.BAD, EncodeElementsFn.TALLY, main="records"
            )
        )
        records = encoded.records
        num_shards = beam.pvalue.AsSingleton(
            records
            | "FramedSizes" >> beam.Map(framed_size)
            | "Total" >> beam.CombineGlobally(beam.combiners.TupleCombineFn(sum, sum))
            | "ChooseShardCount"
            >> beam.Map(
                shard_count,
                target=self._sharding.target_shard_bytes,
                forced=self._sharding.num_shards,
            )
        )
        markers = (
            pcoll.pipeline
            | "One" >> beam.Create([None])
            | "EveryShardIndex" >> beam.FlatMap(lambda _, n: every_index(n), n=num_shards)
        )
        picked = records | "PickShard" >> beam.ParDo(PickShardFn(), num_shards=num_shards)
        return (
            (picked, markers)
            | "WithEveryIndex" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            # One temporary shard per index: `WrittenShard`s.
            | "WriteShards"
            >> beam.ParDo(
                WriteGroupFn(self._temp_dir, self._sharding),
                num_shards=num_shards,
                bad_rows=beam.pvalue.AsList(encoded[EncodeElementsFn.BAD]),
                tallies=beam.pvalue.AsList(encoded[EncodeElementsFn.TALLY]),
            )
            | "Publish" >> PublishShards(self._publish_spec(), features=spec)
            | "WarnOfKeysLeftOut" >> beam.Map(_warn_of_keys_left_out)
        )

    def _spec(self, pcoll: beam.PCollection[Any]) -> Any:
        if self._features:
            return None
        return beam.pvalue.AsSingleton(
            pcoll
            | "SampleForSpec" >> beam.combiners.Sample.FixedSizeGlobally(self._sample_size)
            | "InferSpec" >> beam.Map(infer_spec)
        )

    def _publish_spec(self) -> PublishSpec:
        sharding = self._sharding
        return PublishSpec(
            output=self._output,
            temp_dir=self._temp_dir,
            prefixes=(sharding.shard_prefix,),
            max_bad_fraction=sharding.max_bad_fraction,
            compression=sharding.compression,
            inputs={"source": "WriteShards"},
            options=flags.recorded(sharding),
            order=Order(RecordOrder.SHUFFLED, sharding.shuffle_seed)
            if sharding.order is RecordOrder.SHUFFLED
            else Order(),
            features=self._features,
        )


def _warn_of_keys_left_out(manifest: Manifest) -> Manifest:
    """Says which keys of the elements were not features (the manifest counts them)."""
    left_out = manifest.counts.ignored_fields
    if left_out:
        shown = ", ".join(f"{key!r} ({n:,})" for key, n in list(left_out.items())[:10])
        _log.warning(
            "WriteShards left out %s values of %s that are not features: %s%s; first seen "
            "after the sampled elements, they are not in the feature spec: pass features= "
            "(or a larger sample_size) to keep them",
            f"{sum(left_out.values()):,}", count_of(len(left_out), "key"), shown,
            ", ..." if len(left_out) > 10 else "",
        )  # fmt: skip
    return manifest
