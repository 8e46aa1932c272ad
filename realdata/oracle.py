"""The independent check of one converted file: Python's csv and json modules read the input,
TensorFlow's Example proto the output; nothing of beam_jobs is used but the manifest's spec.

A conversion is exact when every input row is either in the shards with every value as the
spec's dtype holds it (int64: the integer written, true/false as 1/0; float32: the number
rounded to float32; bytes: the text as written; missing: an empty cell or one of the feature's
`null_values`), or in the dead letter at its line. Rows are matched as a multiset: the shards
keep input order within a file, but nothing here depends on it.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime
import io
import json
import math
import pathlib
import re
import struct
import zipfile
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Check", "check_output", "csv_rows", "is_number", "json_rows", "numeric_columns"]

# pandas' default markers (pandas._libs.parsers.STR_NA_VALUES), written out independently.
PANDAS_MARKERS = frozenset(
    {"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
     "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)  # fmt: skip
_CODE = re.compile(r"\s*[+-]?0\d")


@dataclasses.dataclass
class Check:
    """What the check of one file found."""

    rows: int = 0  # input rows
    written: int = 0  # rows matched in the shards
    dead: int = 0  # rows in the dead letter
    problems: list[str] = dataclasses.field(default_factory=list)
    text_numbers: list[str] = dataclasses.field(default_factory=list)  # numbers stored as text
    codes: list[str] = dataclasses.field(default_factory=list)  # leading-zero codes, as text

    @property
    def exact(self) -> bool:
        return not self.problems


def _text(data: bytes) -> str:
    return data.decode("utf-8-sig")


def sniff_delimiter(data: bytes) -> str:
    """The delimiter Python's csv.Sniffer finds in the first lines (of comma, tab, semicolon
    and pipe; comma when it finds none)."""
    head = _text(data[: 64 << 10]).rsplit("\n", 1)[0]
    try:
        return csv.Sniffer().sniff(head, delimiters=",\t;|").delimiter
    except csv.Error:
        return ","


def csv_rows(
    data: bytes, delimiter: str | None = None
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(first line, cells)]) of a CSV file, by Python's csv module (the delimiter:
    `sniff_delimiter`'s when not given)."""
    delimiter = delimiter or sniff_delimiter(data)
    reader = csv.reader(io.StringIO(_text(data), newline=""), delimiter=delimiter)
    header = next(reader)
    rows, line = [], reader.line_num + 1
    for cells in reader:
        if cells:
            rows.append((line, cells))
        line = reader.line_num + 1
    return header, rows


def json_rows(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """[(line or position from 1, object)] of a JSON-lines file, or of a JSON array."""
    text = _text(data)
    if text.lstrip().startswith("["):
        return list(enumerate(json.loads(text), start=1))
    return [(i, json.loads(line)) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def read_input(path: pathlib.Path) -> bytes:
    """A file's bytes; a .zip's one member's."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            [name] = [n for n in z.namelist() if not n.endswith("/")]
            return z.read(name)
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes())
    return path.read_bytes()


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("inf", "-inf", "+inf", "infinity", "-infinity", "nan")


def numeric_columns(header: Sequence[str], rows: Sequence[tuple[int, list[str]]]) -> list[int]:
    """Positions of the columns whose cells are numbers apart from empty ones and pandas'
    markers (and that hold at least one number)."""
    found = []
    for i in range(len(header)):
        values = [c[i] for _, c in rows if i < len(c) and c[i] != "" and c[i] not in PANDAS_MARKERS]
        if values and all(is_number(v) for v in values):
            found.append(i)
    return found


def _f32(value: float) -> bytes:
    return struct.pack("<f", value)


def _expected_csv(cell: str, feature: dict) -> tuple:
    if cell == "" or cell in (feature.get("null_values") or []):
        return ()
    dtype = feature["dtype"]
    if dtype == "bytes":
        return (cell.encode("utf-8"),)
    text = cell.strip()
    if dtype == "int64":
        lower = text.lower()
        return (1 if lower == "true" else 0 if lower == "false" else int(text),)
    value = float(text)
    return (_f32(value) if not math.isnan(value) else "nan",)


def _expected_json(value: Any, feature: dict) -> tuple:
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    dtype = feature["dtype"]
    if dtype == "bytes":
        return tuple(
            (v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))).encode()
            for v in values
        )
    if dtype == "int64" and feature.get("logical_type"):
        return tuple(_temporal(v, feature["logical_type"]) for v in values)
    if dtype == "int64":
        return tuple(int(v) for v in values)
    return tuple(_f32(float(v)) if not math.isnan(float(v)) else "nan" for v in values)


def _temporal(value: str, logical_type: str) -> int:
    """An ISO date's days, or an ISO timestamp's microseconds, since 1970-01-01 (UTC)."""
    if logical_type.startswith("date32"):
        return (datetime.date.fromisoformat(value) - datetime.date(1970, 1, 1)).days
    moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (moment - epoch) // datetime.timedelta(microseconds=1)


def _output_rows(folder: pathlib.Path, manifest: dict) -> Iterator[dict[str, tuple]]:
    import tensorflow as tf

    compression = {"gzip": "GZIP", "zlib": "ZLIB"}.get(manifest.get("compression"), "")
    dtypes = {f["name"]: f["dtype"] for f in manifest["features"]}
    for shard in manifest["shards"]:
        path = str(folder / shard["path"])
        for record in tf.data.TFRecordDataset(path, compression_type=compression):
            example = tf.train.Example.FromString(record.numpy())
            row = {}
            for name, dtype in dtypes.items():
                feature = example.features.feature.get(name)
                if feature is None:
                    row[name] = ()
                elif dtype == "int64":
                    row[name] = tuple(feature.int64_list.value)
                elif dtype == "float32":
                    row[name] = tuple(
                        "nan" if math.isnan(v) else _f32(v) for v in feature.float_list.value
                    )
                else:
                    row[name] = tuple(feature.bytes_list.value)
            yield row


def _dead_lines(folder: pathlib.Path, manifest: dict) -> dict[int, str]:
    lines = {}
    for name in manifest.get("dead_letter", []):
        for text in (folder / name).read_text().splitlines():
            letter = json.loads(text)
            lines[letter.get("line") or -1] = letter.get("reason", "")
    return lines


def _expected_row(row: Any, features: Sequence[dict], csv_cells: bool) -> tuple:
    """The values a row's record holds: CSV cells by position (missing trailing fields are
    missing, pandas' rule), or a JSON object's by key. Raises ValueError for a row that
    converts to no record."""
    if not csv_cells:
        return tuple(_expected_json(row.get(f["name"]), f) for f in features)
    if len(row) < len(features):
        row = [*row, *[""] * (len(features) - len(row))]
    if len(row) != len(features):
        raise ValueError(f"{len(row)} cells")
    return tuple(_expected_csv(c, f) for c, f in zip(row, features, strict=True))


def _table_rows(
    header: Sequence[str], rows: Sequence[tuple[int, Any]], manifest: dict
) -> Sequence[tuple[int, Any]]:
    """The CSV rows that are the table's: below the line that holds the features' names (a
    title above it taken out), less a units line under it (when the features have units,
    its cells are theirs, or a second line's joined by " / ") and the lines of notes at the
    end (as many as counted, each shorter than half the header)."""
    features = manifest["features"]
    names = [f["name"] for f in features]
    if [h.strip() for h in header] != names:
        at = [k for k, (_, cells) in enumerate(rows[:10]) if [c.strip() for c in cells] == names]
        rows = rows[at[0] + 1 :] if at else rows
    units = {i: f["unit"] for i, f in enumerate(features) if f.get("unit") is not None}
    for k in (1, 2):  # a units line, and a second line of names under it
        joined: dict[int, list[str]] = {}
        for _, cells in rows[:k]:
            for i, cell in enumerate(cells):
                if cell.strip():
                    joined.setdefault(i, []).append(cell.strip())
        if units and {i: " / ".join(c) for i, c in joined.items()} == units:
            rows = rows[k:]
            break
    notes = sum(manifest.get("counts", {}).get("notes_lines", {}).values())
    if notes and all(2 * len(c) < len(features) or len(c) == 1 for _, c in rows[-notes:]):
        rows = rows[:-notes]
    return rows


def check_output(
    folder: pathlib.Path,
    header: Sequence[str] | None,
    rows: Sequence[tuple[int, Any]],
) -> Check:
    """Compares a conversion's output with the input rows (CSV cells by header position, or
    JSON objects by key); returns what it found."""
    manifest = json.loads((folder / "manifest.json").read_text())
    features = manifest["features"]
    if header is not None:
        rows = _table_rows(header, rows, manifest)
    dead = _dead_lines(folder, manifest)
    check = Check(rows=len(rows))
    expected: collections.Counter = collections.Counter()
    for line, row in rows:
        if line in dead:
            check.dead += 1
            continue
        try:
            key = _expected_row(row, features, csv_cells=header is not None)
        except (ValueError, TypeError) as e:
            check.problems.append(f"line {line}: not in the dead letter, yet {e}")
            continue
        expected[key] += 1
    got: collections.Counter = collections.Counter(
        tuple(r[f["name"]] for f in features) for r in _output_rows(folder, manifest)
    )
    check.written = sum(got.values())
    if got != expected:
        missing = expected - got
        extra = got - expected
        check.problems.append(
            f"{sum(missing.values())} expected rows not in the output (e.g. "
            f"{list(missing)[:1]}), {sum(extra.values())} output rows not expected (e.g. "
            f"{list(extra)[:1]})"
        )
    if len(dead) > check.dead:
        check.problems.append(f"{len(dead) - check.dead} dead letters at lines of no row")
    if header is not None:
        for i in numeric_columns(header, rows):
            feature = features[i]
            if feature["dtype"] == "bytes":
                values = [c[i] for _, c in rows if i < len(c)]
                if any(_CODE.match(v) for v in values):
                    check.codes.append(feature["name"])
                else:
                    check.text_numbers.append(feature["name"])
    return check
