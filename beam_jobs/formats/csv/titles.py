"""Lines above a CSV header that are no header: a report's title, a weather station's line
(TMY3: 7 fields over 68 columns), a title padded with empty fields to the header's width
(`ASTM G173-03 ...,,,` over `wavelength,...`), or a count line over rows with no header
(scikit-learn's `569,30,malignant,benign`). Read as the header, every row would be a dead
letter or the names wrong. Planning takes titles out of every file (`formats.csv.format`),
and a count line when the file is converted alone; elsewhere they are refused, naming the
flags that read the rows.
"""

from __future__ import annotations

import collections
import csv

from beam_jobs.core.errors import DataError
from beam_jobs.formats.csv.dialect import looks_like_data
from beam_jobs.formats.csv.numbers import reads_as
from beam_jobs.formats.lines.layout import Dialect

__all__ = ["CountLine", "refuse_title_lines", "title_lines"]

_TITLE_LINES_SEEN = 200  # lines whose fields are counted to find title lines above a header
_AGREEING = 0.9  # the share of those lines that must hold the same number of fields


def refuse_title_lines(path: str, head: bytes, dialect: Dialect) -> None:
    """Raises DataError naming --skip_header_lines for title lines above the header
    (`title_lines`): a file past the first, whose titles planning took out, or flags that
    skip fewer lines than its titles."""
    lines, why = title_lines(path, head, dialect)
    if lines:
        skip = dialect.skip_header_lines + lines
        raise DataError(
            f"{why}: a title above the header? --skip_header_lines {skip} reads the header "
            f"from line {skip + 1}"
        )


class CountLine(DataError):
    """A count line above rows without a header (`title_lines`): the lines to skip and the
    names to give the columns (`column_1`, ...)."""

    def __init__(self, message: str, lines: int, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.lines, self.names = lines, names


def _numbers_below(rows: list[list[str]], columns: int) -> bool:
    """Whether some column of `rows` holds numbers only (and some): under a line of names,
    rows of data, not more names (`name,,,` over `alice,smith,NY,teacher` is a header)."""
    for c in range(columns):
        cells = [row[c].strip() for row in rows if c < len(row) and row[c].strip()]
        if cells and all(reads_as(cell, "float32") for cell in cells):
            return True
    return False


def title_lines(path: str, head: bytes, dialect: Dialect) -> tuple[int, str]:
    """The lines above the header that are a report's title (every row would be a dead
    letter), and why: the first lines hold fewer fields than the rows after them, which agree,
    or the first line holds as many but most of them empty (`Spectra,,,` over
    `wl,a,b,c`) over a line of names; (0, "") when the first line is the header. A header
    of one name fewer than the rows is not one (R's row names).

    Raises:
      DataError: naming the flags, for a count line over rows without a header (scikit-
        learn's `569,30,malignant,benign`).
    """
    raw = [line.rstrip(b"\r") for line in head.split(b"\n", _TITLE_LINES_SEEN)]
    delimiter = (dialect.delimiter or ",").encode()
    padded = (
        raw[0].count(delimiter)
        and 2 * sum(1 for field in raw[0].split(delimiter) if field.strip(b' "'))
        < raw[0].count(delimiter) + 1
    )
    if not padded and raw[0].count(delimiter) >= max(
        (line.count(delimiter) for line in raw[1:6]), default=0
    ):
        return 0, ""  # the first line holds as many fields as those after it: the common case
    encoding = dialect.encoding or "utf-8"
    lines = [line.decode(encoding, "replace") for line in raw[:_TITLE_LINES_SEEN]]
    try:
        read = list(csv.reader(lines, delimiter=dialect.delimiter or ","))
    except csv.Error:  # a CR in a line (`old\rmac`): no title is told from such lines
        return 0, ""
    at = [i for i, row in enumerate(read) if row]  # each line's number less one; not blanks
    counts = [len(read[i]) for i in at]
    if len(counts) < 3:
        return 0, ""
    rows, seen = collections.Counter(counts[1:]).most_common(1)[0]
    # Lines of notes at the end of a small file (fewer fields) do not count against agreeing.
    notes = next((k for k, n in enumerate(reversed(counts[1:])) if n >= rows), 0)
    if seen < _AGREEING * (len(counts) - 1 - notes):
        return 0, ""
    where = f"{path}: line {dialect.skip_header_lines + 1}"
    if padded and counts[0] == rows:
        names = [f.strip() for f in read[at[1]]]
        if (
            all(names)
            and not any(reads_as(n, "float32") for n in names)
            and _numbers_below([read[i] for i in at[2:]], rows)
        ):
            filled = sum(1 for f in read[at[0]] if f.strip())
            return at[1], f"{where} fills {filled} of its {rows} fields, over a line of names"
        return 0, ""
    if counts[0] >= rows or counts[0] == rows - 1 > 1:
        return 0, ""
    first = next(i for i in at if len(read[i]) == rows)
    names = [f.strip() for f in read[first] if f.strip()]
    skip = dialect.skip_header_lines + first
    if names and looks_like_data(names) and all(read[i][-1].strip() for i in at[1:6]):
        # Rows right below, no header for them (scikit-learn's `569,30,malignant,benign`
        # above its rows: a count line). Trailing delimiters would leave the last field empty.
        generated = tuple(f"column_{k}" for k in range(1, rows + 1))
        raise CountLine(
            f"{where} holds {counts[0]} field(s) but the rows after it hold {rows} and have no "
            f"header line (line {skip + 1} is data): is line {dialect.skip_header_lines + 1} a "
            f"count or a title? --skip_header_lines {skip} --column_names {','.join(generated)} "
            "reads the rows (name the columns as you like)",
            skip,
            generated,
        )
    if not names or looks_like_data(names):
        return 0, ""  # no header below: the rows hold more fields than the header
    return first, f"{where} holds {counts[0]} field(s) but most lines after it hold {rows}"
