"""Human-readable text for `inspect` and for the end of `convert`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from beam_jobs.core.bad_rows import DEAD_LETTER_DIR
from beam_jobs.core.units import count_of, format_size
from beam_jobs.formats.csv.markers import column_markers
from beam_jobs.plan.conversion import ConversionPlan
from beam_jobs.plan.warnings import plan_warnings
from beam_jobs.sink.dead_letter import first_bad_rows
from tfdata_reader.manifest import FeatureSpec, Manifest

__all__ = [
    "bad_rows_note",
    "describe",
    "describe_plan",
    "feature_table",
    "float32_changes_note",
    "format_table",
    "ignored_fields_note",
    "missing_label_note",
    "notes_lines_note",
    "null_markers_note",
    "resumed_note",
    "short_rows_note",
    "summarize_run",
    "units_note",
]


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligns the first column and right-aligns the others."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _shape(shape: list[int] | None) -> str:
    return "variable" if shape is None else str(shape)


def feature_table(
    features: Sequence[FeatureSpec], seen: Mapping[str, Mapping[str, int]] | None = None
) -> str:
    """One row per feature: name, dtype, shape, nullable, and its missing-value markers
    when any feature has some: those a conversion found, with how many cells (`seen`, by
    feature: a manifest's `markers_seen`), else those it would take (a plan)."""
    header = ["feature", "dtype", "shape", "nullable"]
    rows = [[f.name, f.dtype, _shape(f.shape), "yes" if f.nullable else "no"] for f in features]
    if any(f.unit is not None for f in features):
        header.append("unit")
        for row, feature in zip(rows, features, strict=True):
            row.append(feature.unit or "-")
    shown = [_markers(f) if seen is None else _markers_seen(seen.get(f.name, {})) for f in features]
    if any(m != "-" for m in shown):
        header.append("missing markers" if seen is None else "missing markers seen")
        for row, markers in zip(rows, shown, strict=True):
            row.append(markers)
    return format_table(header, rows)


def _markers(feature: FeatureSpec) -> str:
    markers = tuple(feature.null_values or ())
    if not markers:
        return "-"
    defaults = column_markers(feature.dtype, None)
    if markers[: len(defaults)] == defaults:
        more = "".join(f", {m!r}" for m in markers[len(defaults) :])
        return f"pandas' defaults (NA, N/A, NULL, null, None, #N/A, <NA>, ...){more}"
    return ", ".join(markers)


def _markers_seen(seen: Mapping[str, int]) -> str:
    return ", ".join(f"{m!r} {n:,}" for m, n in seen.items()) or "-"


def _seen(manifest: Manifest) -> Mapping[str, Mapping[str, int]] | None:
    """The markers found by feature, when the manifest records them (since 2026-12-07)."""
    counts = manifest.counts
    if counts.markers_seen or (counts.recorded and not counts.null_markers):
        return counts.markers_seen
    return None


def describe(manifest: Manifest, location: str) -> str:
    """The `inspect` summary: totals, one row per shard, one row per feature."""
    sizes = [s.bytes for s in manifest.shards]
    balance = f"{max(sizes) / max(1, min(sizes)):.2f}" if sizes else "-"
    lines = [
        f"dataset      {location}",
        f"created      {manifest.created} by {manifest.tool.get('name', '?')} "
        f"{manifest.tool.get('version', '?')}",
        f"records      {manifest.total_records:,}",
        f"fingerprint  {manifest.fingerprint}",
        f"shards       {len(manifest.shards)} ({format_size(manifest.total_bytes)}, "
        f"compression {manifest.compression}, largest/smallest {balance})",
        f"inputs       {count_of(len(manifest.inputs.get('files', [])), 'file')}, "
        f"{format_size(manifest.inputs.get('total_bytes', 0))}",
        *(
            f"split        {name}: {v['records']:,} records in {count_of(v['shards'], 'shard')} "
            f"({format_size(v['bytes'])}), weight {v['weight']}"
            for name, v in manifest.split_summary().items()
        ),
        *(
            [
                f"labels       {len(manifest.label_vocabulary)}: "
                + ", ".join(f"{i}={n}" for i, n in enumerate(manifest.label_vocabulary[:20]))
                + (", ..." if len(manifest.label_vocabulary) > 20 else "")
            ]
            if manifest.label_vocabulary
            else []
        ),
        "",
        format_table(
            ["shard", "records", "bytes", "crc32c"],
            [(s.path, f"{s.records:,}", format_size(s.bytes), s.crc32c) for s in manifest.shards],
        ),
        "",
        feature_table(manifest.features, _seen(manifest)),
    ]
    return "\n".join(lines)


def summarize_run(manifest: Manifest, elapsed_seconds: float) -> str:
    """The table `convert` prints when it finishes."""
    input_bytes = manifest.inputs.get("total_bytes", 0)
    seconds = max(elapsed_seconds, 1e-9)
    sizes = [s.bytes for s in manifest.shards]
    rows = [
        (
            "inputs",
            f"{count_of(len(manifest.inputs.get('files', [])), 'file')}, "
            f"{format_size(input_bytes)}",
        ),
        ("records read", f"{manifest.counts.records_read or 0:,}"),
        ("records written", f"{manifest.total_records:,}"),
        ("bad records", f"{manifest.counts.bad_records:,}"),
        ("shards", f"{len(sizes)}, {format_size(min(sizes))} to {format_size(max(sizes))}"),
        ("bytes written", format_size(manifest.total_bytes)),
        ("fingerprint", manifest.fingerprint),
        ("elapsed", f"{elapsed_seconds:.1f} s"),
        (
            "throughput",
            f"{manifest.total_records / seconds:,.0f} records/s, "
            f"{input_bytes / seconds / 1e6:.1f} MB/s of input",
        ),
    ]
    return format_table(["conversion", "done"], rows)


def resumed_note(manifest: Manifest) -> list[str]:
    """What a resumed conversion reused of a failed run's finished work (none: nothing)."""
    counts = manifest.counts
    if not counts.tasks_reused:
        return []
    ran = counts.tasks - counts.tasks_reused
    return [
        f"resumed: {counts.tasks_reused:,} of {count_of(counts.tasks, 'task')} reused, {ran:,} run"
    ]


def missing_label_note(manifest: Manifest) -> list[str]:
    """A warning when records have no label: the reader gives them -1 (int64; NaN for a
    float), the same as a real -1, so a careful user filters or fills them."""
    if manifest.label is None:
        return []
    missing = manifest.counts.missing_values.get(manifest.label, 0)
    if not missing:
        return []
    fill = "its id -1" if manifest.label_vocabulary else "-1 (NaN for floats)"
    return [
        f"warning: {count_of(missing, 'record')} without a label {manifest.label!r}: "
        f"make_dataset gives them {fill}, like a real label of that value; filter them out or "
        "fill them upstream"
    ]


def float32_changes_note(manifest: Manifest) -> list[str]:
    """Warnings naming the float32 features whose whole numbers float32 changed, and those
    whose numbers below its range it stored as 0."""
    notes = []
    rounded = manifest.counts.float32_rounded_integers
    if rounded:
        notes.append(
            "warning: float32 changed whole numbers beyond 2**24 (16777217 is stored as "
            f"16777216) in: {_by_name(rounded)}; to keep them exact, give such features the "
            "dtype int64 (or bytes) in a --schema file"
        )
    zeroed = manifest.counts.float32_stored_as_zero
    if zeroed:
        notes.append(
            "warning: numbers below float32's range (under 1.4e-45, e.g. 1e-50) were stored as "
            f"0 in: {_by_name(zeroed)}; to keep them as written, give such features the "
            "dtype bytes in a --schema file"
        )
    return notes


def short_rows_note(manifest: Manifest) -> list[str]:
    """A warning naming the CSV files whose rows held fewer fields than the header."""
    found = manifest.counts.short_rows
    if not found:
        return []
    shown = _by_name(dict(list(found.items())[:5]))
    more = f", and {len(found) - 5} more files" if len(found) > 5 else ""
    return [
        f"warning: {sum(found.values()):,} rows held fewer fields than the header and were read "
        f"with their missing trailing fields as missing values, as pandas reads them: {shown}"
        f"{more} (a row cut short by a damaged file would be among them)"
    ]


def notes_lines_note(manifest: Manifest) -> list[str]:
    """A line naming the CSV files that ended with lines of notes, left out."""
    found = manifest.counts.notes_lines
    if not found:
        return []
    shown = _by_name(dict(list(found.items())[:5]))
    more = f", and {len(found) - 5} more files" if len(found) > 5 else ""
    return [
        f"notes: {sum(found.values()):,} lines after the last row of a table held one field or "
        f"fewer than half the columns (a source line, footnotes, a date): taken as notes, not "
        f"rows: {shown}{more}"
    ]


def _by_name(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} ({n:,})" for k, n in counts.items())


def null_markers_note(manifest: Manifest) -> list[str]:
    """A warning naming the features whose missing-value markers (NA, NULL, ...) were read as
    missing, and how many cells each."""
    found = manifest.counts.null_markers
    if not found:
        return []
    seen = manifest.counts.markers_seen
    shown = ", ".join(
        f"{k} ({_markers_seen(seen[k])})" if k in seen else f"{k} ({n:,})"
        for k, n in list(found.items())[:10]
    )
    more = f", and {len(found) - 10} more" if len(found) > 10 else ""
    return [
        f"warning: {sum(found.values()):,} cells held a missing-value marker and were read as "
        f"missing values: {shown}{more} (`inspect` lists them per feature, `inspect --schema` "
        "the markers each reads; --null_values sets them, --infer_null_values false keeps "
        "one-token ones such as '.' as they are)"
    ]


def units_note(manifest: Manifest) -> list[str]:
    """A line naming the units a units line under the CSV header gave the features: that
    line was taken out of the data."""
    units = [(f.name, f.unit) for f in manifest.features if f.unit is not None]
    if not units:
        return []
    shown = ", ".join(f"{name} ({unit})" for name, unit in units[:8])
    more = f", and {len(units) - 8} more" if len(units) > 8 else ""
    return [
        f"units: the line under the header held the columns' units, taken out of the data and "
        f"kept as the features' units: {shown}{more} (`inspect` lists them; --units_row false "
        "reads that line as data)"
    ]


def ignored_fields_note(manifest: Manifest) -> list[str]:
    """A warning naming the keys (JSON lines) that were not features and were left out."""
    ignored = manifest.counts.ignored_fields
    if not ignored:
        return []
    shown = ", ".join(f"{k} ({n:,})" for k, n in list(ignored.items())[:10])
    more = ", ..." if len(ignored) > 10 else ""
    return [
        f"warning: {sum(ignored.values()):,} values of {len(ignored)} keys that are not "
        f"features were left out: {shown}{more}; first seen after the sampled head, they are "
        "not in the feature spec: name them in --schema (or raise --sample_bytes) to keep them"
    ]


def bad_rows_note(output: str, dead_letters: Sequence[str], limit: int = 5) -> list[str]:
    """The first bad rows of a run, where they are and why, so that nobody has to open the dead
    letter to see what went wrong.

    Args:
      output: the output folder.
      dead_letters: the run's dead-letter files, relative to it.
    """
    folder = f"{output}/{DEAD_LETTER_DIR}"
    # In shard order, which is input order: shards finish (and are listed) in any order.
    paths = [f"{output}/{name}" for name in sorted(dead_letters)]
    try:
        rows = first_bad_rows(paths, limit)
    except Exception as e:  # the note is a courtesy; the dead letter itself is published
        return [f"(could not read {folder}/: {e})"]
    return [f"first bad rows (all of them are in {folder}/):", *(f"  {r}" for r in rows)]


def _planned_shards(plan: ConversionPlan) -> str:
    target = f"(target {format_size(plan.sharding.target_shard_bytes)})"
    if not plan.splits:
        estimate = plan.estimated_output_bytes / len(plan.shards)
        each = " each" if len(plan.shards) > 1 else ""
        line = (
            f"shards       {count_of(len(plan.shards), 'shard')} of about "
            f"{format_size(estimate)}{each} {target}"
        )
    else:
        total = sum(s.weight for s in plan.splits)
        parts = []
        counts = plan.shards_per_split()
        for split, share in zip(plan.splits, plan.split_shares, strict=True):
            count = counts[split.name]
            size = plan.estimated_output_bytes * share / count
            parts.append(
                f"{split.name} ({split.weight}/{total}): {count:,} of about {format_size(size)}"
            )
        line = f"shards       {'; '.join(parts)} {target}"
    tasks = _tasks(plan)
    return f"{line}\ntasks        {tasks}" if tasks else line


def _tasks(plan: ConversionPlan) -> str:
    """What the write tasks do, when it is not a task writing each shard whole."""
    tasks = count_of(len(plan.tasks), "write task")
    if plan.shuffle is not None:
        units = count_of(len(plan.shuffle.units()), "unit")
        return (
            f"{tasks} deal the records out to random buckets of the shards; {units} then "
            "write them, each bucket's records in a random order"
        )
    if plan.splits:
        return (
            f"{tasks}, reading the input once; each writes its rows of each split to a part "
            "of that split's shard"
        )
    if len(plan.tasks) == len(plan.shards):
        return ""
    return f"{tasks}; a shard of many files is written in parts, joined in order"


def describe_plan(plan: ConversionPlan, output: str | None) -> str:
    """What `convert --dry_run` (and `inspect --input`, without an output) prints: inputs,
    features, and the planned shards."""
    lines = [
        f"dry run: nothing written to {output}" if output else "plan (nothing is written)",
        f"format       {plan.input_format.describe()}",
        f"inputs       {count_of(len(plan.files), 'file')}, {format_size(plan.input_bytes)}",
        f"estimate     {count_of(round(plan.estimated_records), 'record')}, "
        f"{format_size(plan.estimated_output_bytes)} of shards "
        f"({plan.output_bytes_per_input_byte:.3f} output bytes per input byte, from samples)",
        _planned_shards(plan),
        *(f"warning: {w}" for w in plan_warnings(plan)),
        "",
        feature_table(plan.features),
        "",
        format_table(
            ["shard", "input bytes", "pieces", "first input"],
            [
                (
                    f"{s.split} {s.index}" if s.split else s.index,
                    format_size(s.input_bytes),
                    len(s.pieces),
                    s.pieces[0].path if s.pieces else "-",
                )
                for s in plan.shards
            ],
        ),
    ]
    return "\n".join(lines)
