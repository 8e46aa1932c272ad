"""`statistics.pb` read back (local or gs://), and printed as a table for `inspect --stats`."""

from __future__ import annotations

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from google.protobuf.message import DecodeError
from tensorflow_metadata.proto.v0 import statistics_pb2

from beam_jobs.core.errors import ManifestError
from beam_jobs.inspection.report import format_table
from beam_jobs.stats.proto import DISTINCT_EXACT, STATISTICS_NAME, TOP_VALUES_EXACT, is_exact

__all__ = ["load_statistics", "statistics_table"]


def load_statistics(output: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    """Reads `OUT/statistics.pb`.

    Raises:
      ManifestError: when it is missing (conversions before statistics were added wrote none)
        or damaged (not a statistics proto, or one without datasets), naming the path.
    """
    path = FileSystems.join(output.rstrip("/"), STATISTICS_NAME)
    if not FileSystems.exists(path):
        raise ManifestError(
            f"{path} does not exist: the dataset was converted by a version that wrote no "
            "statistics (or is not a tfrecord-etl output); convert it again to get them"
        )
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        data = f.read()
    result = statistics_pb2.DatasetFeatureStatisticsList()
    try:
        result.ParseFromString(data)
    except DecodeError as e:
        raise ManifestError(
            f"{path} is damaged: it is not a DatasetFeatureStatisticsList ({e}); convert the "
            "dataset again to rewrite it"
        ) from e
    if not result.datasets:  # we write one dataset at least; an empty file parses as none
        raise ManifestError(
            f"{path} is damaged: it holds no dataset statistics ({len(data):,} bytes); convert "
            "the dataset again to rewrite it"
        )
    return result


def statistics_table(stats: statistics_pb2.DatasetFeatureStatisticsList) -> str:
    """One table per dataset (split): a row per feature."""
    parts = []
    for dataset in stats.datasets:
        rows = [_row(feature) for feature in dataset.features]
        parts.append(
            f"{dataset.name}: {dataset.num_examples:,} records\n"
            + format_table(
                [
                    "feature",
                    "type",
                    "present",
                    "missing",
                    "values/record",
                    "min",
                    "max",
                    "mean",
                    "std dev",
                    "zeros",
                    "distinct",
                    "top value",
                ],
                rows,
            )
        )
    return "\n\n".join(parts)


def _number(value: float) -> str:
    return f"{value:.6g}"


def _row(feature: statistics_pb2.FeatureNameStatistics) -> tuple[str, ...]:
    name = "/".join(feature.path.step) or feature.name
    kind = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type).lower()
    which = feature.WhichOneof("stats")
    common = getattr(feature, which).common_stats if which else statistics_pb2.CommonStatistics()
    values = (
        f"{common.min_num_values}-{common.max_num_values}"
        if common.min_num_values != common.max_num_values
        else str(common.max_num_values)
    )
    head = (name, kind, f"{common.num_non_missing:,}", f"{common.num_missing:,}", values)
    if which == "num_stats":
        n = feature.num_stats
        if not common.tot_num_values:
            return (*head, "-", "-", "-", "-", "-", "-", "-")
        return (
            *head, _number(n.min), _number(n.max), _number(n.mean), _number(n.std_dev),
            f"{n.num_zeros:,}", "-", "-",
        )  # fmt: skip
    if which == "string_stats":
        s = feature.string_stats
        top = s.top_values[0] if s.top_values else None
        about = "" if is_exact(feature, TOP_VALUES_EXACT) else "~"
        shown = f"{_short(top.value)} ({about}{top.frequency:,.0f})" if top else "-"
        return (*head, "-", "-", "-", "-", "-", _distinct(feature, s.unique), shown)
    if which == "bytes_stats":
        b = feature.bytes_stats
        return (
            *head, f"{b.min_num_bytes:,.0f} B", f"{b.max_num_bytes:,.0f} B",
            f"{b.avg_num_bytes:,.1f} B", "-", "-", _distinct(feature, b.unique), "-",
        )  # fmt: skip
    return (*head, "-", "-", "-", "-", "-", "-", "-")


def _distinct(feature: statistics_pb2.FeatureNameStatistics, unique: int) -> str:
    return f"{'' if is_exact(feature, DISTINCT_EXACT) else '~'}{unique:,}"


def _short(text: str, limit: int = 24) -> str:
    text = text.replace("\n", "\\n")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
