"""A units line under the header (`id,mm,kg,C` below `part,length,weight,temp`, as engineering
parts lists and lab exports ship; day types `SA,FT,WT` under month names): read as data, its
text would make every number column text in a small file, and be a dead letter beside number
columns in a large one, whose sample is mostly numbers. It is taken out of the data instead,
and each cell kept as its column's unit (`FeatureSpec.unit`: the manifest, `schema.pbtxt`,
`inspect`); `--units_row false` reads it as a row of data.

The rule, on the first file's head (it decides, like the delimiter): the header's names hold
no number (a header of one, `703165,SAND POINT,AK`, may be a line above the real one), the
first row under the header holds no number, and in at least one number column (one whose
other sampled values, at least three, are numbers or missing-value markers by inference's
share) unit-like text (a letter, `%` or `°`; not a marker: `?` is none), and in at least
half of the number columns unit-like text or nothing (so that a row of data with one bad
value among numbers is still a row, a bad one), in two such columns unless the line holds
nothing else (`,,V` is a units line, `Alice,unknown,` a row), no unit that is also a value
of its column below (`<LOD`), and no cell longer than a unit. Every file, sampled or not,
must then start with the same header and units lines (`UnitsRow.check`), as they are
skipped.
"""

from __future__ import annotations

import csv
import dataclasses
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.core.errors import DataError
from beam_jobs.formats.csv.dialect import skip_lines
from beam_jobs.formats.csv.inference import number_columns
from beam_jobs.formats.csv.markers import DEFAULT_MARKERS, TOKEN
from beam_jobs.formats.csv.numbers import reads_as
from beam_jobs.formats.csv.source import CsvSample

__all__ = ["UnitsRow", "find_units_row", "find_units_rows", "line_of", "may_be_units"]

_LEAST_VALUES = 3  # other values of a number column
_LONGEST_UNIT = 40  # characters: a longer cell is data, not a unit
_MOST_LINES = 2  # a units line, and a second line of names under it
_LEAST_WORDED = 2  # number columns with a unit, unless the line holds nothing else

_UNIT_LIKE = re.compile(r"[^\W\d_]|[%°µ‰]")


@dataclasses.dataclass(frozen=True)
class UnitsRow:
    """The units line found under the first file's header.

    Attributes:
      path: the first file, where it was found.
      number: the line number of its last line (1 = the first line of a file).
      header: the header line above it, as written (every file must have it).
      lines: the units line, as written, and a second such line under it (SAM's libraries:
        `Units,V,W` then `[0],inv_snl_ac_voltage,...`), when there is one.
      units: by column name, the unit (columns whose cells are empty have none): the cells
        of the lines, joined by " / ".
      names: the columns, as the features are named.
    """

    path: str
    number: int
    header: bytes
    lines: tuple[bytes, ...]
    units: dict[str, str]
    names: tuple[str, ...]

    @property
    def header_number(self) -> int:
        """The header's line number."""
        return self.number - len(self.lines)

    def where(self) -> str:
        """`line 2`, or `lines 2-3`."""
        if len(self.lines) == 1:
            return f"line {self.number}"
        return f"lines {self.header_number + 1}-{self.number}"

    def describe(self) -> str:
        shown = ", ".join(f"{name} ({unit})" for name, unit in list(self.units.items())[:6])
        more = f", and {len(self.units) - 6} more" if len(self.units) > 6 else ""
        return f"{shown}{more}"

    def check(self, path: str, head: bytes, encoding: str, delimiter: str) -> None:
        """Raises DataError when a file's header and units lines (the last it skips, through
        line `number`) are not the first file's."""
        first = self.header_number
        expected = [(first, "header", self.header)] + [
            (first + k, "units line", line) for k, line in enumerate(self.lines, 1)
        ]
        for number, what, want in expected:
            found = line_of(head, number, encoding) or b""
            if found != want and _cells(found, delimiter) != _cells(want, delimiter):
                raise DataError(
                    f"{path}: line {number} {found[:200]!r} is not the {what} of {self.path} "
                    f"({want[:200]!r}), whose line {self.number} holds the columns' units and "
                    "is taken out of every file; convert such files apart, or read that line "
                    "as data in all (--units_row false)"
                )


def _cells(line: bytes, delimiter: str) -> list[str]:
    """A line's cells as Python's csv module reads them (`id,mm,"kg"` is `id,mm,kg`)."""
    try:
        return next(csv.reader([line.decode("utf-8", "replace")], delimiter=delimiter), [])
    except csv.Error:
        return [line.decode("utf-8", "replace")]


def line_of(head: bytes, number: int, encoding: str) -> bytes | None:
    """Line `number` (1 = the first) of a file's head, without its line end (and a UTF-8 BOM
    on the first); None when the head is shorter."""
    start = skip_lines(head, number - 1) if number > 1 else 0
    if start is None or start >= len(head):
        return None
    end = skip_lines(head, number)
    line = head[start : len(head) if end is None else end].rstrip(b"\r\n")
    if number == 1 and encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        line = line.removeprefix(b"\xef\xbb\xbf")
    return line


def may_be_units(line: bytes | None, delimiter: str, encoding: str) -> bool:
    """A first look at the line under a header (cheap: planning reads the head again only
    when it passes): no cell a number, some cell unit-like."""
    if line is None:
        return False
    try:
        cells = next(csv.reader([line.decode(encoding)], delimiter=delimiter), [])
    except (UnicodeDecodeError, LookupError, csv.Error):
        return False
    present = [c for c in cells if c.strip()]
    return not any(reads_as(c, "float32") for c in present) and any(
        _UNIT_LIKE.search(c) for c in present
    )


def find_units_rows(sample: CsvSample) -> list[dict[str, str]]:
    """The units of the sample's first row, and of its second when it is one too, each by
    column name (`find_units_row`); [] when the first row is data."""
    found: list[dict[str, str]] = []
    while len(found) < _MOST_LINES and (units := find_units_row(sample)) is not None:
        found.append(units)
        sample = dataclasses.replace(sample, texts=sample.texts.slice(1))
    return found


def find_units_row(sample: CsvSample) -> dict[str, str] | None:
    """The units of the sample's first row, by column name, when it is a units line by the
    module's rule; None when it is data."""
    texts = sample.texts
    if texts.num_rows <= _LEAST_VALUES or any(reads_as(n, "float32") for n in sample.header):
        return None  # a header of a number (`703165,SAND POINT,AK`) may be a line above it
    first = [texts.column(i)[0].as_py() for i in range(texts.num_columns)]
    present = [i for i, cell in enumerate(first) if cell is not None and cell.strip()]
    if not present or any(reads_as(first[i], "float32") for i in present):
        return None  # a row of data (`unknown,unknown,200,alice`): a units row holds no number
    if any(len(first[i]) > _LONGEST_UNIT for i in present):
        return None
    markers = sorted(set(DEFAULT_MARKERS) | set(sample.dialect.null_values or ()))
    numeric = number_columns([texts.column(i).slice(1) for i in range(texts.num_columns)], markers)
    marker_set = set(markers)
    worded = [
        i
        for i in numeric
        if i in present
        and first[i] not in marker_set
        and not re.match(TOKEN, first[i])
        and _UNIT_LIKE.search(first[i])
    ]
    blank = [i for i in numeric if i not in present]
    if not worded or 2 * (len(worded) + len(blank)) < len(numeric):
        return None
    if len(worded) < _LEAST_WORDED and set(present) - set(worded):
        return None  # one word among numbers beside text (`Alice,unknown,`): a row of data
    for i in worded:  # a unit is no value of its column (`<LOD` again below: data)
        below = texts.column(i).slice(1)
        if pc.any(pc.equal(below, pa.scalar(first[i], below.type))).as_py():
            return None
    return {sample.column_names[i]: first[i].strip() for i in present}


def _flags(mask: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
