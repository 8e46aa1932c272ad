"""Missing-value markers: cells such as `NA` or `NULL` that stand for no value.

R's `write.csv` writes `NA`, databases export `NULL`, spreadsheets `#N/A`. An empty cell is
always missing. Other markers are missing where `--null_values` names them (in every column),
or, without the flag, in the columns that inference makes numbers: there the markers are
pandas' default set (`DEFAULT_MARKERS`), as `pandas.read_csv` reads them. A text column keeps
such cells as text unless the flag names them: a real `NA` may be Namibia, or sodium.

A float column's markers leave out those that are numbers (`NaN`, `nan`): they stay NaN, a
float value, as before. The markers are recorded per feature in the manifest (`null_values`),
so that `inspect --schema` reproduces them, and the cells they turned missing are counted.

Exports also write a missing number as one short token pandas does not know: `.` (Stata, SAS,
FRED), `-` and `--` (spreadsheets), `?`, `nil`, `n.a.`. Without `--null_values`, and unless
`--infer_null_values false`, such a token (`TOKEN`: one to four marks such as `.-?*#/:`,
or one of a few words that mean "no value"; never a letter of any script, nor `%` or `$`) is
a missing value in a column of numbers, where inference finds it in the sample (a column
mostly of numbers: `inference`) and where a writer finds it later (a number column's cell
that is no number): counted by token (`value_counts`) and recorded with the feature's
markers. A word of letters is no token (a grade `K` among `1, 2, 3` is a value).
"""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.formats.csv.numbers import reads_as

__all__ = [
    "DEFAULT_MARKERS",
    "TOKEN",
    "column_markers",
    "readable_as",
    "value_counts",
    "without_markers",
    "without_tokens",
]

# pandas' `STR_NA_VALUES` (pandas/_libs/parsers.pyx), less "" (always missing here).
DEFAULT_MARKERS: tuple[str, ...] = (
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)


# One to four marks, or a word meaning "no value", spaces around allowed (as numbers' are); for
# RE2 (pyarrow) and Python's `re` alike. The marks are listed, not "no letter or digit": RE2's
# `\w` knows ASCII letters only (`É` would be a mark), and `%`, `$`, `°` are units, not values.
_MARKS = "[.\\-\u2013\u2014?*#/:~_+!=|^&@<>()\\[\\]{}';\\\\]"  # en and em dashes too
TOKEN = r"(?i)^\s*(" + _MARKS + r"{1,4}|nil|none|null|na|n/a|n\.a\.?|nd|n\.d\.?|missing)\s*$"


def value_counts(cells: pa.Array) -> dict[str, int]:
    """How many times each distinct cell (binary or string) occurs, as text."""
    text = cells.cast(pa.string()) if pa.types.is_binary(cells.type) else cells
    return {c["values"]: c["counts"] for c in pc.value_counts(text.drop_null()).to_pylist()}


def readable_as(marker: str, dtype: str) -> bool:
    """Whether `marker` is itself a value of `dtype` (`-999` of int64, `NaN` of float32): a
    number column's parse would read it as that number."""
    return reads_as(marker, dtype)


@functools.lru_cache(maxsize=64)  # asked for every column: 50 us each, seconds at 5,000
def column_markers(dtype: str, given: tuple[str, ...] | None) -> tuple[str, ...]:
    """The markers of a column of `dtype`: those `--null_values` gave (None: not given), else
    for a number column pandas' default set less those that are numbers of its type."""
    if given is not None:
        return given
    if dtype == "bytes":
        return ()
    return tuple(m for m in DEFAULT_MARKERS if not readable_as(m, dtype))


def without_markers(column: pa.Array, markers: tuple[str, ...]) -> tuple[pa.Array, dict[str, int]]:
    """`column` (binary or string) with its cells that hold a marker made null, and how many
    of each marker."""
    if not markers:
        return column, {}
    text = column.view(pa.string()) if pa.types.is_binary(column.type) else column
    found = pc.is_in(text, value_set=pa.array(markers, pa.string()))
    return _nulled(column, text, found)


def without_tokens(column: pa.Array) -> tuple[pa.Array, dict[str, int]]:
    """`column` (binary or string) of a number column with its cells that are a one-token
    missing value (`TOKEN`) made null, and how many of each token."""
    text = column.view(pa.string()) if pa.types.is_binary(column.type) else column
    return _nulled(column, text, pc.match_substring_regex(text, TOKEN))


def _nulled(column: pa.Array, text: pa.Array, found: pa.Array) -> tuple[pa.Array, dict[str, int]]:
    found = pc.fill_null(found, False)
    if not pc.any(found).as_py():
        return column, {}
    counts = value_counts(text.filter(found))
    return pc.if_else(found, pa.scalar(None, column.type), column), counts
