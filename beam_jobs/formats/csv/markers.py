"""Missing-value markers: cells such as `NA` or `NULL` that stand for no value.

R's `write.csv` writes `NA`, databases export `NULL`, spreadsheets `#N/A`. An empty cell is
always missing. Other markers are missing where `--null_values` names them (in every column),
or, without the flag, in the columns that inference makes numbers: there the markers are
pandas' default set (`DEFAULT_MARKERS`), as `pandas.read_csv` reads them. A text column keeps
such cells as text unless the flag names them: a real `NA` may be Namibia, or sodium.

A float column's markers leave out those that are numbers (`NaN`, `nan`): they stay NaN, a
float value, as before. The markers are recorded per feature in the manifest (`null_values`),
so that `inspect --schema` reproduces them, and the cells they turned missing are counted.
"""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.formats.csv.numbers import reads_as

__all__ = ["DEFAULT_MARKERS", "column_markers", "readable_as", "without_markers"]

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


def without_markers(column: pa.Array, markers: tuple[str, ...]) -> tuple[pa.Array, int]:
    """`column` (binary or string) with its cells that hold a marker made null, and how many."""
    if not markers:
        return column, 0
    text = column.view(pa.string()) if pa.types.is_binary(column.type) else column
    found = pc.is_in(text, value_set=pa.array(markers, pa.string()))
    count = pc.sum(found).as_py() or 0
    if not count:
        return column, 0
    return pc.if_else(found, pa.scalar(None, column.type), column), count
