"""`tfrecord-etl report OUT`: one self-contained HTML page about a converted dataset.

The page needs nothing at view time (no network, no scripts from elsewhere): the summary, a
bar per shard against the size target, each feature's histogram or top values with its
missing share (from `statistics.pb`), the splits, and the dead-letter reasons with counts and
their first rows. Charts are inline SVG. The dataset may be local or on gs://.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Sequence
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from tensorflow_metadata.proto.v0 import statistics_pb2

from beam_jobs.core.bad_rows import row_location
from beam_jobs.core.errors import ManifestError
from beam_jobs.core.units import count_of, format_size
from beam_jobs.inspection.stats_table import load_statistics
from beam_jobs.publish.output_dir import load_manifest
from beam_jobs.stats.proto import DISTINCT_EXACT, TOP_VALUES_EXACT, is_exact
from tfdata_reader.manifest import Manifest

__all__ = [
    "DeadLetterReason",
    "ReportData",
    "dead_letter_reasons",
    "load_report",
    "render",
    "write_report",
]

EXAMPLES_PER_REASON = 3
MAX_REASONS = 50  # distinct reasons shown; the rest are counted together


@dataclasses.dataclass
class DeadLetterReason:
    """One reason rows were set aside, how many, and the first of them (`file:line`, cells)."""

    reason: str
    count: int = 0
    examples: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ReportData:
    location: str
    manifest: Manifest
    statistics: statistics_pb2.DatasetFeatureStatisticsList | None
    reasons: list[DeadLetterReason]
    other_reasons: int  # rows whose reason is not among the MAX_REASONS shown
    statistics_problem: str = ""  # why there are no statistics: missing, or damaged


def load_report(output: str) -> ReportData:
    """Everything the page shows, read from the dataset folder (local or gs://).

    Raises:
      ManifestError: when the folder has no readable manifest.
    """
    manifest = load_manifest(output)
    try:
        statistics, problem = load_statistics(output), ""
    except ManifestError as e:  # missing (an older version's dataset) or damaged: the page says
        statistics, problem = None, str(e)
    paths = [FileSystems.join(output.rstrip("/"), p) for p in manifest.dead_letter]
    reasons, other = dead_letter_reasons(paths)
    return ReportData(output, manifest, statistics, reasons, other, problem)


def dead_letter_reasons(paths: Sequence[str]) -> tuple[list[DeadLetterReason], int]:
    """Reasons with their counts, most frequent first, and the count of rows past the
    MAX_REASONS shown. Streams the files: a dead letter may hold millions of rows."""
    found: dict[str, DeadLetterReason] = {}
    other = 0
    for path in paths:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for raw in f:
                row = json.loads(raw)
                reason = str(row.get("reason", "?"))
                entry = found.get(reason)
                if entry is None:
                    if len(found) == MAX_REASONS:
                        other += 1
                        continue
                    entry = found[reason] = DeadLetterReason(reason)
                entry.count += 1
                if len(entry.examples) < EXAMPLES_PER_REASON:
                    entry.examples.append(_example(row))
    return sorted(found.values(), key=lambda r: (-r.count, r.reason)), other


def _example(row: dict[str, Any]) -> str:
    where = row_location(row)
    content = row.get("raw", row.get("cells"))
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"{where}  {_shorten(text or '', 200)}"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


# --- rendering ------------------------------------------------------------------------------

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px;
       color: #1d2330; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 3px 10px; text-align: right; border-bottom: 1px solid #e3e6ec; }
td:first-child, th:first-child { text-align: left; }
.muted { color: #6b7385; } .bad { color: #b3261e; }
.features { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr));
            gap: 14px; }
.feature { border: 1px solid #e3e6ec; border-radius: 6px; padding: 10px 12px; }
.feature h3 { font-size: 15px; margin: 0 0 2px; font-family: ui-monospace, monospace; }
.chart { display: block; }
pre { white-space: pre-wrap; word-break: break-all; background: #f5f6f8; padding: 6px;
      margin: 4px 0; font-size: 12px; }
"""

# Marks each chart's rendered size and any script error on <body> (data-chart-sizes,
# data-errors): a check anyone can read in the browser's inspector, and the tests do.
_SCRIPT = """
window.__errors = 0;
window.addEventListener('error', function () { window.__errors += 1; });
window.addEventListener('load', function () {
  var sizes = Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (c) {
    var r = c.getBoundingClientRect(); return Math.round(r.width) + 'x' + Math.round(r.height);
  });
  document.body.setAttribute('data-chart-sizes', sizes.join(' '));
  document.body.setAttribute('data-errors', String(window.__errors));
});
"""


def render(data: ReportData) -> str:
    """The whole page, as one string."""
    m = data.manifest
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>tfrecord-etl report: {_e(data.location)}</title>",
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>",
        f"<h1>{_e(data.location)}</h1>",
        f'<div class="muted">created {_e(m.created)} by {_e(m.tool.get("name", "?"))} '
        f"{_e(m.tool.get('version', '?'))}; fingerprint {_e(m.fingerprint)}</div>",
        _summary(m),
        _shards(m),
        _splits(m),
        _features(data),
        _dead_letters(data),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def _summary(m: Manifest) -> str:
    counts = m.counts
    read = counts.records_read if counts.records_read is not None else m.total_records
    bad = counts.bad_records
    rows = [
        ("records read", f"{read:,}"),
        ("records written", f"{m.total_records:,}"),
        ("bad records (dead letter)", f"{bad:,} ({bad / read:.3%})" if read else f"{bad:,}"),
        (
            "shards",
            f"{len(m.shards):,} ({format_size(m.total_bytes)}, compression {m.compression})",
        ),
        (
            "inputs",
            f"{len(m.inputs.get('files', [])):,} files, "
            f"{format_size(m.inputs.get('total_bytes', 0))}",
        ),
        ("features", f"{len(m.features)}"),
    ]
    return "<h2>Summary</h2>" + _table(["", ""], rows)


def _target(m: Manifest) -> int | None:
    """The size target shards were planned for (None when --num_shards chose the count)."""
    if m.options.get("num_shards"):
        return None
    target = m.options.get("target_shard_bytes")
    return int(target) if isinstance(target, int | float) and target > 0 else None


def _shards(m: Manifest) -> str:
    sizes = [s.bytes for s in m.shards]
    if not sizes:
        return ""
    target = _target(m)
    top = max([*sizes, target or 0]) or 1
    width, height, pad = 1000, 180, 30
    step = (width - pad) / len(sizes)
    bars = []
    for i, (shard, size) in enumerate(zip(m.shards, sizes, strict=True)):
        h = (height - 20) * size / top
        bar = max(step * 0.85, 0.5)
        bars.append(
            f'<rect x="{pad + i * step:.2f}" y="{height - h:.2f}" width="{bar:.2f}" '
            f'height="{h:.2f}" fill="#4c78a8"><title>{_e(shard.path)}: '
            f"{_e(format_size(size))}, {shard.records:,} records</title></rect>"
        )
    line = ""
    if target:
        y = height - (height - 20) * target / top
        line = (
            f'<line x1="{pad}" x2="{width}" y1="{y:.2f}" y2="{y:.2f}" stroke="#b3261e" '
            f'stroke-dasharray="6 4"/><text x="{pad + 4}" y="{y - 4:.2f}" font-size="12" '
            f'fill="#b3261e">target {_e(format_size(target))}</text>'
        )
    balance = max(sizes) / max(1, min(sizes))
    return (
        "<h2>Shard sizes</h2>"
        f'<div class="muted">{count_of(len(sizes), "shard")}, {_e(format_size(min(sizes)))} to '
        f"{_e(format_size(max(sizes)))}, largest/smallest {balance:.2f}</div>"
        f'<svg class="chart" id="shard-sizes" viewBox="0 0 {width} {height}" width="100%" '
        f'height="{height}" preserveAspectRatio="none" role="img" '
        f'aria-label="shard sizes">{"".join(bars)}{line}</svg>'
    )


def _splits(m: Manifest) -> str:
    summary = m.split_summary()
    if not summary:
        return ""
    rows = [
        (name, v["weight"], f"{v['records']:,}", v["shards"], format_size(v["bytes"]))
        for name, v in summary.items()
    ]
    return "<h2>Splits</h2>" + _table(["split", "weight", "records", "shards", "bytes"], rows)


def _features(data: ReportData) -> str:
    if data.statistics is None:
        return f'<h2>Features</h2><p class="muted">{_e(data.statistics_problem)}</p>'
    parts = ["<h2>Features</h2>"]
    for dataset in data.statistics.datasets:
        if len(data.statistics.datasets) > 1:
            parts.append(f"<h3>{_e(dataset.name)}: {dataset.num_examples:,} records</h3>")
        cards = [_feature(f, dataset.num_examples) for f in dataset.features]
        parts.append(f'<div class="features">{"".join(cards)}</div>')
    return "\n".join(parts)


def _feature(feature: statistics_pb2.FeatureNameStatistics, records: int) -> str:
    name = "/".join(feature.path.step) or feature.name
    kind = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type).lower()
    which = feature.WhichOneof("stats")
    stats = getattr(feature, which) if which else None
    common = stats.common_stats if stats is not None else statistics_pb2.CommonStatistics()
    share = common.num_missing / records if records else 0.0
    lines = [
        f'<div class="feature" data-feature="{_e(name)}"><h3>{_e(name)}</h3>',
        f'<div class="muted">{_e(kind)}; {common.num_non_missing:,} present, '
        f"{common.num_missing:,} missing ({share:.1%})</div>",
    ]
    if which == "num_stats" and common.tot_num_values:
        n = feature.num_stats
        lines.append(
            f'<div class="muted">min {n.min:.6g}, max {n.max:.6g}, mean {n.mean:.6g}, '
            f"std dev {n.std_dev:.6g}, zeros {n.num_zeros:,}</div>"
        )
        standard = [h for h in n.histograms if h.type == statistics_pb2.Histogram.STANDARD]
        histogram = standard[0] if standard else n.histograms[0] if n.histograms else None
        if histogram is not None and histogram.buckets:
            lines.append(_histogram(histogram))
    elif which == "string_stats":
        s = feature.string_stats
        lines.append(
            f'<div class="muted">{_about(feature, DISTINCT_EXACT)}{s.unique:,} distinct, '
            f"average length {s.avg_length:.1f} bytes</div>"
        )
        if s.top_values:
            exact = is_exact(feature, TOP_VALUES_EXACT)
            lines.append(_top_values([(t.value, t.frequency) for t in s.top_values], exact))
    elif which == "bytes_stats":
        b = feature.bytes_stats
        lines.append(
            f'<div class="muted">{_about(feature, DISTINCT_EXACT)}{b.unique:,} distinct, '
            f"{b.min_num_bytes:,.0f} to {b.max_num_bytes:,.0f} bytes, "
            f"average {b.avg_num_bytes:,.1f}</div>"
        )
    lines.append("</div>")
    return "".join(lines)


def _histogram(histogram: statistics_pb2.Histogram) -> str:
    buckets = list(histogram.buckets)
    top = max(b.sample_count for b in buckets) or 1.0
    width, height = 300, 90
    step = width / len(buckets)
    bars = []
    for i, b in enumerate(buckets):
        h = (height - 14) * b.sample_count / top
        bars.append(
            f'<rect x="{i * step:.2f}" y="{height - 14 - h:.2f}" width="{step * 0.9:.2f}" '
            f'height="{h:.2f}" fill="#4c78a8"><title>{b.low_value:.6g} to '
            f"{b.high_value:.6g}: {b.sample_count:,.0f}</title></rect>"
        )
    low, high = buckets[0].low_value, buckets[-1].high_value
    labels = (
        f'<text x="0" y="{height - 2}" font-size="11" fill="#6b7385">{low:.4g}</text>'
        f'<text x="{width}" y="{height - 2}" font-size="11" fill="#6b7385" '
        f'text-anchor="end">{high:.4g}</text>'
    )
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" height="{height}" '
        f'role="img" aria-label="histogram">{"".join(bars)}{labels}</svg>'
    )


def _about(feature: statistics_pb2.FeatureNameStatistics, name: str) -> str:
    """'~' before a count that is an estimate."""
    return "" if is_exact(feature, name) else "~"


def _top_values(values: list[tuple[str, float]], exact: bool) -> str:
    top = max(count for _, count in values) or 1.0
    about = "" if exact else "~"  # the sketch's counts: estimates
    row, width = 17, 300
    rows = []
    for i, (value, count) in enumerate(values):
        w = (width - 170) * count / top  # room after the longest bar for its count
        rows.append(
            f'<text x="0" y="{i * row + 12}" font-size="11">{_e(_shorten(value, 18))}</text>'
            f'<rect x="120" y="{i * row + 2}" width="{w:.2f}" height="{row - 5}" '
            f'fill="#72b7b2"><title>{_e(value)}: {about}{count:,.0f}</title></rect>'
            f'<text x="{124 + w:.2f}" y="{i * row + 12}" font-size="11" '
            f'fill="#6b7385">{about}{count:,.0f}</text>'
        )
    height = row * len(values)
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" height="{height}" '
        f'role="img" aria-label="top values">{"".join(rows)}</svg>'
    )


def _dead_letters(data: ReportData) -> str:
    if not data.reasons:
        return '<h2>Dead letter</h2><p class="muted">No rows were set aside.</p>'
    parts = ["<h2>Dead letter</h2>", _table(
        ["reason", "rows"],
        [(r.reason, f"{r.count:,}") for r in data.reasons]
        + ([("(other reasons)", f"{data.other_reasons:,}")] if data.other_reasons else []),
        "bad",
    )]  # fmt: skip
    for r in data.reasons[:10]:
        examples = "".join(f"<pre>{_e(x)}</pre>" for x in r.examples)
        parts.append(f"<details><summary>{_e(r.reason)}</summary>{examples}</details>")
    return "\n".join(parts)


def write_report(output: str, path: str) -> ReportData:
    """Renders the page for the dataset at `output` and writes it to `path` (local or gs://)."""
    data = load_report(output)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(render(data).encode("utf-8"))
    return data
