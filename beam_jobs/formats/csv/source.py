"""CSV input: sampling a file's head and inferring feature types (`ranges` reads byte ranges).

pyarrow's CSV reader does the parsing (quoted fields with commas, doubled quotes and newlines,
UTF-8 checks); this module only decides what bytes it sees and which types it converts to.
An empty cell is a missing value (null), and nothing else is: "NA" or "null" stay strings.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from beam_jobs.errors import DataError
from beam_jobs.formats.csv.record_starts import (
    record_starts,
)
from tfdata_reader.manifest import FeatureSpec

__all__ = ["CsvSample", "convert_options", "infer_features", "parse_sample"]

_BLOCK_SIZE = 1 << 20
# Arrow types each Example dtype is converted from. Floats are parsed as float64 and rounded to
# float32 afterwards, exactly as `float(text)` into a `tf.train.FloatList` would.
_log = logging.getLogger(__name__)
_PARSE_TYPES = {"int64": pa.int64(), "float32": pa.float64(), "bytes": pa.string()}


@dataclasses.dataclass(frozen=True)
class CsvSample:
    """The head of one CSV file, cut at a record boundary."""

    path: str
    column_names: list[str]
    table: pa.Table  # the sampled rows, with pyarrow's own type inference
    data: bytes  # the sampled bytes, header included, ending at a record boundary


def _parse_options() -> pcsv.ParseOptions:
    # Malformed rows in a sample are left out of inference; the writers dead-letter them.
    return pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=lambda row: "skip")


def convert_options(column_types: dict[str, pa.DataType] | None = None) -> pcsv.ConvertOptions:
    return pcsv.ConvertOptions(
        column_types=column_types or {},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        check_utf8=False,  # checked per value when converting, so bad rows can be set aside
    )


def parse_sample(path: str, head: bytes, is_whole_file: bool) -> CsvSample:
    """Parses the first bytes of a CSV file: its header and the complete records among them.

    Args:
      path: the file's path, for error messages.
      head: the file's first bytes.
      is_whole_file: True when `head` is the entire file (so its last record is complete).
    """
    if not head.strip():
        raise DataError(f"{path}: the file is empty; a CSV input needs at least a header line")
    starts = record_starts(head)
    if starts.size == 0 and not is_whole_file:
        raise DataError(
            f"{path}: no complete header line in the first {len(head)} bytes; is it a CSV file?"
        )
    end = len(head) if is_whole_file else int(starts[-1])
    try:
        table = pcsv.read_csv(
            io.BytesIO(head[:end]),
            read_options=pcsv.ReadOptions(use_threads=False),
            parse_options=_parse_options(),
            convert_options=convert_options(),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise DataError(f"{path}: bytes 0-{end}: {e}") from e
    return CsvSample(path, table.column_names, table, head[:end])


def infer_features(
    samples: Sequence[CsvSample], overrides: Sequence[FeatureSpec] = ()
) -> list[FeatureSpec]:
    """Feature specs for the columns of the first sample, typed from all samples.

    A column is int64 when pyarrow reads every sampled value as an integer, float32 when as a
    number, and bytes otherwise (also when all sampled values are missing). `overrides` (from a
    `--schema` file) win over inference, column by column.

    Raises:
      DataError: when samples disagree on the header or an override names no column.
    """
    names = samples[0].column_names
    for sample in samples[1:]:
        if sample.column_names != names:
            raise DataError(
                f"{sample.path}: header {sample.column_names} differs from {names} in "
                f"{samples[0].path}; all inputs of one conversion need the same columns"
            )
    by_name = {f.name: f for f in overrides}
    unknown = sorted(set(by_name) - set(names))
    if unknown:
        raise DataError(f"--schema names columns {unknown} that the CSV header {names} lacks")
    features = []
    for name in names:
        if name in by_name:
            features.append(dataclasses.replace(by_name[name], shape=[]))
            continue
        types = [s.table.schema.field(name).type for s in samples]
        nullable = any(s.table.column(name).null_count for s in samples)
        known = [t for t in types if not pa.types.is_null(t)]
        if known and all(pa.types.is_integer(t) for t in known):
            dtype = "int64"
        elif known and all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in known):
            dtype = "float32"
            if all(_integer_texts(s, name) for s in samples):
                # pyarrow reads integers beyond int64 (20-digit ids) as doubles; as float32
                # they would silently become other numbers.
                _log.warning(
                    "column %r holds integers beyond the int64 range (e.g. in %s): it is read "
                    "as text (bytes), as no Example number type holds them exactly",
                    name,
                    samples[0].path,
                )
                dtype = "bytes"
        else:
            dtype = "bytes"
        features.append(FeatureSpec(name, dtype, [], nullable))
    return features


def _integer_texts(sample: CsvSample, name: str) -> bool:
    """Whether every sampled value of a column is written as an integer (digits, a sign)."""
    table = pcsv.read_csv(
        io.BytesIO(sample.data),
        read_options=pcsv.ReadOptions(use_threads=False),
        parse_options=_parse_options(),
        convert_options=pcsv.ConvertOptions(
            column_types={name: pa.string()}, include_columns=[name], null_values=[""]
        ),
    )
    values = table.column(name).drop_null()
    return len(values) > 0 and bool(
        pc.all(pc.match_substring_regex(values, r"^\s*[+-]?\d+\s*$")).as_py()
    )
