"""What a plan may get wrong that the user should hear before the run."""

from __future__ import annotations

from beam_jobs.core.units import count_of, format_size
from beam_jobs.formats.compressed import compression_of
from beam_jobs.plan.conversion import ConversionPlan

__all__ = ["plan_warnings"]

_OVERSIZED = 1.5  # times the target: a shard worth warning about


def plan_warnings(plan: ConversionPlan) -> list[str]:
    """What a plan may get wrong that the user should hear before the run: no records at all,
    and compressed inputs that make shards far over the target (one writer reads each whole)."""
    found = []
    if plan.estimated_records < 0.5 and plan.sampled_bad_rows:
        found.append(
            f"the plan estimates 0 records: none of the sampled rows converts "
            f"({count_of(plan.sampled_bad_rows, 'bad row')}, e.g. "
            f"{'; '.join(plan.sampled_bad_examples)}); check --encoding, --delimiter, "
            "--column_names and --schema"
        )
    elif plan.estimated_records < 0.5:
        found.append(
            "the plan estimates 0 records: the sampled heads hold no complete record; check "
            f"--format ({plan.input_format.name}) and the inputs"
        )
    if plan.requested_shards:
        fewer = {k: n for k, n in plan.shards_per_split().items() if n < plan.requested_shards}
        if fewer:
            compressed = [f.path for f in plan.files if compression_of(f.path)]
            why = (
                f"a compressed file cannot be cut ({compressed[0]}), so one writer reads each whole"
                if compressed
                else f"the {plan.input_format.name} input could not be cut into more pieces "
                f"than its {count_of(len(plan.files), 'file')}, {plan.input_bytes:,} bytes, give"
            )
            found.append(
                f"--num_shards {plan.requested_shards}, but the plan has "
                f"{count_of(min(fewer.values()), 'shard')}"
                f"{' per split' if plan.splits else ''}: {why}; split such files upstream "
                "for more shards"
            )
    target = plan.sharding.target_shard_bytes
    for shard in plan.shards:
        compressed = [p.path for p in shard.pieces if compression_of(p.path)]
        estimate = shard.input_bytes * plan.output_bytes_per_input_byte
        if compressed and estimate > _OVERSIZED * target:
            found.append(
                f"shard {shard.index} will be about {format_size(estimate)} (target "
                f"{format_size(target)}): {compressed[0]} is compressed, so one "
                "writer reads it whole; split such files upstream for size-targeted shards"
            )
    return found
