"""CSV input: sampling a file's head, inferring feature types, reading one byte range as Arrow.

pyarrow's CSV reader does the parsing (quoted fields with commas, doubled quotes and newlines,
UTF-8 checks); this module only decides what bytes it sees and which types it converts to.
An empty cell is a missing value (null), and nothing else is: "NA" or "null" stay strings.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pcsv

from beam_jobs.csv_ranges import record_starts
from tfdata_reader.manifest import FeatureSpec

__all__ = ["CsvDataError", "CsvSample", "infer_features", "parse_sample", "read_range"]

_BLOCK_SIZE = 1 << 20
# Types the reader converts each Example dtype from. Floats are parsed as float64 and rounded to
# float32 afterwards, exactly as `float(text)` into a `tf.train.FloatList` would.
_PARSE_TYPES = {"int64": pa.int64(), "float32": pa.float64(), "bytes": pa.string()}


class CsvDataError(ValueError):
    """A CSV file could not be parsed or converted; the message names the file and byte range."""


@dataclasses.dataclass(frozen=True)
class CsvSample:
    """The head of one CSV file, cut at a record boundary."""

    path: str
    column_names: list[str]
    table: pa.Table  # the sampled rows, with pyarrow's own type inference
    data: bytes  # the sampled bytes, header included, ending at a record boundary


def _parse_options() -> pcsv.ParseOptions:
    return pcsv.ParseOptions(newlines_in_values=True)


def _convert_options(column_types: dict[str, pa.DataType] | None = None) -> pcsv.ConvertOptions:
    return pcsv.ConvertOptions(
        column_types=column_types or {},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        check_utf8=True,
    )


def parse_sample(path: str, head: bytes, is_whole_file: bool) -> CsvSample:
    """Parses the first bytes of a CSV file: its header and the complete records among them.

    Args:
      path: the file's path, for error messages.
      head: the file's first bytes.
      is_whole_file: True when `head` is the entire file (so its last record is complete).
    """
    if not head.strip():
        raise CsvDataError(f"{path}: the file is empty; a CSV input needs at least a header line")
    starts = record_starts(head, 0)
    if starts.size == 0 and not is_whole_file:
        raise CsvDataError(
            f"{path}: no complete header line in the first {len(head)} bytes; is it a CSV file?"
        )
    end = len(head) if is_whole_file else int(starts[-1])
    try:
        table = pcsv.read_csv(
            io.BytesIO(head[:end]),
            read_options=pcsv.ReadOptions(use_threads=False),
            parse_options=_parse_options(),
            convert_options=_convert_options(),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise CsvDataError(f"{path}: bytes 0-{end}: {e}") from e
    return CsvSample(path, table.column_names, table, head[:end])


def infer_features(
    samples: Sequence[CsvSample], overrides: Sequence[FeatureSpec] = ()
) -> list[FeatureSpec]:
    """Feature specs for the columns of the first sample, typed from all samples.

    A column is int64 when pyarrow reads every sampled value as an integer, float32 when as a
    number, and bytes otherwise (also when all sampled values are missing). `overrides` (from a
    `--schema` file) win over inference, column by column.

    Raises:
      CsvDataError: when samples disagree on the header or an override names no column.
    """
    names = samples[0].column_names
    for sample in samples[1:]:
        if sample.column_names != names:
            raise CsvDataError(
                f"{sample.path}: header {sample.column_names} differs from {names} in "
                f"{samples[0].path}; all inputs of one conversion need the same columns"
            )
    by_name = {f.name: f for f in overrides}
    unknown = sorted(set(by_name) - set(names))
    if unknown:
        raise CsvDataError(f"--schema names columns {unknown} that the CSV header {names} lacks")
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
        else:
            dtype = "bytes"
        features.append(FeatureSpec(name, dtype, [], nullable))
    return features


class _Window(io.RawIOBase):
    """Bytes [start, end) of a seekable binary file, as a readable stream."""

    def __init__(self, f: BinaryIO, start: int, end: int) -> None:
        f.seek(start)
        self._f = f
        self._left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: min(len(buffer), self._left)]
        data = self._f.read(len(view))
        view[: len(data)] = data
        self._left -= len(data)
        return len(data)


def read_range(
    f: BinaryIO,
    path: str,
    start: int,
    end: int,
    features: Sequence[FeatureSpec],
) -> Iterator[pa.RecordBatch]:
    """Reads the records in bytes [start, end) of a CSV file as Arrow batches.

    Args:
      f: the file, opened for binary reading and seekable.
      path: its path, for error messages.
      start: a record start; 0 means the range begins with the file's header line.
      end: a record start (or the file size) after `start`.
      features: the columns, in header order, with the dtypes to convert to.

    Raises:
      CsvDataError: naming the file and the byte range, for unparseable or mistyped data and a
        header that differs from the expected columns.
    """
    names = [feature.name for feature in features]
    read_options = pcsv.ReadOptions(
        block_size=_BLOCK_SIZE,
        use_threads=False,
        column_names=None if start == 0 else names,
    )
    column_types = {feature.name: _PARSE_TYPES[feature.dtype] for feature in features}
    where = f"{path}: bytes {start}-{end}"
    try:
        reader = pcsv.open_csv(
            io.BufferedReader(_Window(f, start, end), buffer_size=_BLOCK_SIZE),
            read_options=read_options,
            parse_options=_parse_options(),
            convert_options=_convert_options(column_types),
        )
        if reader.schema.names != names:
            raise CsvDataError(
                f"{path}: header {reader.schema.names} differs from the expected columns {names}; "
                "all inputs of one conversion need the same columns"
            )
        for batch in reader:
            if batch.num_rows:
                yield batch
    except pa.ArrowInvalid as e:
        hint = ""
        if "conversion error to int64" in str(e) or "conversion error to double" in str(e):
            hint = "; column types are inferred from a sample: set them with --schema"
        raise CsvDataError(f"{where}: {e}{hint}") from e
