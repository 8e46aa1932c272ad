"""The type of a CSV column, from its sampled values as written, with the reasons said aloud.

pyarrow's own inference alone is silently wrong on real files: it reads `01234` (ZIP, FIPS
codes) as 1234, a 20-digit id as a rounded float, makes a whole column text because of one
`n/a` in the sampled head (so no later row is ever a bad row), and says nothing when a float
column needs more digits than float32 keeps. The rules here, on the sampled texts:

- missing-value markers (`markers`: pandas' set, `NA`, `NULL`, ..., or `--null_values`) are
  set aside first: a column of numbers and `NA` is a number column whose `NA` cells are
  missing values (a text column keeps them as text unless `--null_values` names them);
- `true`/`false` (any case) only: int64 1/0, as JSON booleans convert;
- numbers only, or at least 99% numbers: int64 when all are integers, else float32 (the rest
  are bad rows when written, and a warning names the column and shows a few);
- but text (bytes) when a number is written with a leading zero, or an integer does not fit
  int64: such values are codes and ids, kept exactly as written (a warning names them);
- a majority of numbers but under 99%: text, with a warning naming the column;
- a float32 column with values of more than 7 significant digits gets an info line (float32
  keeps about 7, as TensorFlow users expect), naming the `--schema` choice that keeps them.

Each decision is a `TypeNote`; planning logs one line per kind, naming every column.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.formats.csv.markers import DEFAULT_MARKERS, TOKEN, column_markers, readable_as
from beam_jobs.formats.csv.numbers import BOOLEAN, INTEGER, NUMBER
from beam_jobs.schema.precision import FLOAT32_ROUNDING
from beam_jobs.schema.type_notes import TypeNote

__all__ = [
    "NUMERIC_SHARE",
    "ColumnType",
    "infer_column",
    "null_values_flag",
    "number_columns",
    "plain_number_columns",
    "plain_text_columns",
    "schema_hint",
]

NUMERIC_SHARE = 0.99  # of the sampled non-empty values, for a column to be a number column
_SOME_NUMBERS = 0.5  # below NUMERIC_SHARE but a majority: text, with a warning
_LEADING_ZERO = r"^\s*[+-]?0\d"
_FLOAT32_DIGITS = 7
_DIGITS_LOOKED_AT = 10_000  # values whose significant digits the float32 note counts


@dataclasses.dataclass(frozen=True)
class ColumnType:
    """A column's Example dtype, its missing-value markers, and what the user should know
    about how they were chosen."""

    dtype: str
    notes: tuple[TypeNote, ...] = ()
    null_values: tuple[str, ...] | None = None  # the column's missing-value markers
    markers_seen: int = 0  # sampled cells that hold one of them


def schema_hint(name: str, dtype: str) -> str:
    """How to give a column its type: a line of a --schema file (`{"features": [...]}`)."""
    return f'add {json.dumps({"name": name, "dtype": dtype})} to the "features" of a --schema file'


def _examples(values: pa.Array, limit: int = 3) -> str:
    # As bytes first: a sampled value need not be UTF-8 (its row is a dead letter later).
    found = pc.unique(values).slice(0, limit).cast(pa.binary()).to_pylist()
    return ", ".join(repr(v.decode("utf-8", "replace")) for v in found)


def _significant_digits(values: pa.Array) -> pa.Array:
    """Digits that carry information in each number as written (sign, point, exponent and
    leading or trailing zeros aside)."""
    digits = pc.replace_substring_regex(values, r"(?i)e.*$", "")
    digits = pc.replace_substring_regex(digits, r"[^0-9]", "")
    digits = pc.replace_substring_regex(digits, r"^0+|0+$", "")
    return pc.utf8_length(digits)


def infer_column(
    name: str, texts: pa.Array, given: tuple[str, ...] | None = None, tokens: bool = True
) -> ColumnType:
    """The type of a column from its sampled non-empty values, as written (strings), and its
    missing-value markers (`markers`): those `--null_values` gave (`given`), or, when not
    given, pandas' default markers in a column whose other values are numbers, and with
    `tokens` the one-token markers (`markers.TOKEN`: `.`, `-`, `nil`) of a column mostly of
    numbers."""
    candidates = given if given is not None else _NOT_NUMBERS
    is_marker = pc.is_in(texts, value_set=pa.array(candidates, pa.string()))
    rest = texts.filter(pc.invert(is_marker))
    found = _tokens(rest) if tokens and given is None else []
    if found:
        is_token = pc.is_in(rest, value_set=pa.array(found, pa.string()))
        typed = _infer_values(name, rest.filter(pc.invert(is_token)))
        if typed.dtype == "bytes" or _token_share(rest, is_token) > 1 - _SOME_NUMBERS:
            found = []  # text, or not mostly numbers: the tokens are values of a text column
    typed = _infer_values(name, rest) if not found else typed
    markers = column_markers(typed.dtype, given) + tuple(found)
    seen = texts.filter(pc.is_in(texts, value_set=pa.array(markers, pa.string())))
    notes = list(typed.notes)
    if len(seen) and given is None:
        notes.append(
            TypeNote(
                "numbers with missing-value markers: those cells are missing values (pandas' "
                "markers and one-token ones such as '.' or 'nil'; --null_values names "
                "others, --infer_null_values false keeps one-token ones as they are)",
                name,
                _counted(seen, len(texts)),
                warning=False,
            )
        )
    if not markers:
        kept = texts.filter(pc.is_in(texts, value_set=pa.array(DEFAULT_MARKERS, pa.string())))
        if len(kept):
            notes.append(
                TypeNote(
                    "text with cells pandas reads as missing: kept as text (a real 'NA' may "
                    "be Namibia); --null_values NA (or the markers meant) reads them as missing",
                    name,
                    _counted(kept, len(texts)),
                    warning=False,
                )
            )
    return dataclasses.replace(
        typed,
        notes=tuple(notes),
        null_values=markers if markers or given is not None else None,
        markers_seen=len(seen),
    )


def _tokens(texts: pa.Array) -> list[str]:
    """The distinct one-token markers (`markers.TOKEN`) among a column's sampled texts."""
    candidates = texts.filter(pc.fill_null(pc.match_substring_regex(texts, TOKEN), False))
    return sorted(pc.unique(candidates).to_pylist()) if len(candidates) else []


def _token_share(texts: pa.Array, is_token: pa.Array) -> float:
    return (pc.sum(is_token).as_py() or 0) / max(len(texts), 1)


# pandas' markers that are no number: `NaN` is a float's value when typing a column.
_NOT_NUMBERS = tuple(m for m in DEFAULT_MARKERS if not readable_as(m, "float32"))


# What the cells that are no numbers in a column of numbers may be to read as missing-value
# markers: a few short tokens without digits (`.` in FRED's and Stata's exports, `-`, `nil`).
_MARKER_LIKE = re.compile(r"^[^\d\s,]{1,4}$")
_MAX_MARKERS = 3


def _marker_like(others: pa.Array) -> list[str]:
    """The distinct non-number cells when they look like missing-value markers, else []."""
    distinct = pc.unique(others).to_pylist()
    if len(distinct) > _MAX_MARKERS or not all(_MARKER_LIKE.match(v) for v in distinct):
        return []
    return sorted(distinct)


def null_values_flag(markers: Sequence[str]) -> str:
    """`--null_values=...` naming `markers`, quoted for a shell where it must be."""
    return shlex.quote("--null_values=" + ",".join(markers))


def _counted(values: pa.Array, total: int) -> str:
    counts = pc.value_counts(values).to_pylist()
    shown = ", ".join(f"{c['values']!r} {c['counts']:,}" for c in counts[:3])
    return f"{shown} of {total:,} sampled"


def _infer_values(name: str, texts: pa.Array) -> ColumnType:
    """The type of a column from its sampled values that are no missing-value marker."""
    if len(texts) == 0:
        return ColumnType("bytes")
    if pc.all(pc.match_substring_regex(texts, BOOLEAN)).as_py():
        return ColumnType("int64")
    is_number = pc.match_substring_regex(texts, NUMBER)
    numbers = texts.filter(is_number)
    share = len(numbers) / len(texts)
    if share < NUMERIC_SHARE:
        if share < _SOME_NUMBERS:
            return ColumnType("bytes")
        others = texts.filter(pc.invert(is_number))
        whole = pc.all(pc.match_substring_regex(numbers, INTEGER)).as_py()
        dtype = "int64" if whole else "float32"
        markers = _marker_like(others)
        advice = (
            f"to read them as missing values, add {null_values_flag(markers)} (or, to send "
            f"them to the dead letter, give it the dtype {dtype} in a --schema file)"
            if markers
            else f"to read numbers (the others then go to the dead letter), give it the dtype "
            f"{dtype} in a --schema file"
        )
        return _text(
            f"mostly numbers, but not all: read as text (bytes); {advice}",
            name,
            f"{share:.0%} numbers; not: {_examples(others)}",
        )
    codes = numbers.filter(pc.match_substring_regex(numbers, _LEADING_ZERO))
    if len(codes):
        return _text(
            "numbers written with leading zeros: read as text (bytes), so codes such as ZIP "
            "codes stay as written (an int64 column would send such values to the dead letter)",
            name,
            f"e.g. {_examples(codes)}",
        )
    integral = pc.all(pc.match_substring_regex(numbers, INTEGER)).as_py()
    if integral and not _fit_int64(numbers):
        return _text(
            "integers beyond the int64 range: read as text (bytes), as no Example number "
            "type holds them exactly",
            name,
            f"e.g. {_examples(_beyond_int64(numbers))}",
        )
    dtype = "int64" if integral else "float32"
    notes = []
    if share < 1:
        others = texts.filter(pc.invert(is_number))
        notes.append(
            TypeNote(
                "numbers but for a few sampled values: read as numbers, and rows with such "
                "values go to the dead letter; to keep a column as text, give it the dtype "
                "bytes in a --schema file",
                name,
                f"{dtype}; {len(others):,} of {len(texts):,} not: {_examples(others)}",
            )
        )
    if dtype == "float32":
        # An info line: a look at the first values shows it (three regexes over all cost).
        looked_at = numbers.slice(0, _DIGITS_LOOKED_AT)
        long = looked_at.filter(pc.greater(_significant_digits(looked_at), _FLOAT32_DIGITS))
        if len(long):
            notes.append(TypeNote(FLOAT32_ROUNDING, name, f"e.g. {_examples(long)}", False))
    return ColumnType(dtype, tuple(notes))


def _text(kind: str, name: str, detail: str) -> ColumnType:
    return ColumnType("bytes", (TypeNote(kind, name, detail),))


def plain_number_columns(
    columns: Sequence[Sequence[pa.Array]], given: tuple[str, ...] | None = None
) -> dict[int, ColumnType]:
    """The columns whose sampled values are plain numbers, typed at once; by position.

    `columns`: each column's sampled texts (string arrays, null when empty). A column is plain
    when it has values, all of them numbers, none a missing-value marker (pandas' or
    `given`), none with a leading zero, integers that fit int64, or for a float column none
    with more than float32's digits: `infer_column` gives such a column its dtype and markers
    with no note, and so does this, with a few Arrow calls over all the columns' values
    rather than a dozen a column (0.4 ms each: seconds for 5,000 columns). The others are
    left out, for `infer_column`.
    """
    labelled = _labelled(columns)
    if labelled is None:
        return {}
    values, labels = labelled

    def per_column(mask: pa.Array | np.ndarray) -> np.ndarray:
        flags = np.asarray(mask, dtype=bool) if isinstance(mask, np.ndarray) else _flags(mask)
        return np.bincount(labels, weights=flags, minlength=len(columns))

    present = _flags(pc.is_valid(values))
    markers = pa.array(sorted(set(DEFAULT_MARKERS) | set(given or ())), pa.string())
    number = _flags(pc.match_substring_regex(values, NUMBER))
    integer = _flags(pc.match_substring_regex(values, INTEGER))
    plain = (
        (per_column(present) > 0)
        & (per_column(pc.is_in(values, value_set=markers)) == 0)
        & (per_column(present & ~number) == 0)
        & (per_column(pc.match_substring_regex(values, _LEADING_ZERO)) == 0)
    )
    integral = plain & (per_column(present & ~integer) == 0)
    # An integer of 19 bytes or more (sign and spaces included) may be beyond int64: such a
    # column is left to `infer_column`; shorter ones (no leading zeros) are below 10**18.
    # (Bytes, not characters: a sampled value need not be UTF-8.)
    long_integer = _flags(pc.greater_equal(pc.binary_length(values), 19))
    plain &= ~(integral & (per_column(long_integer & integer) > 0))
    floats = plain & ~integral
    if floats.any():
        float_values = values.filter(pa.array(floats[labels] & present))
        long = _flags(pc.greater(_significant_digits(float_values), _FLOAT32_DIGITS))
        float_labels = labels[floats[labels] & present]
        plain &= ~(floats & (np.bincount(float_labels, long, len(columns)) > 0))
    found = {}
    for i in np.flatnonzero(plain).tolist():
        dtype = "int64" if integral[i] else "float32"
        markers_of = column_markers(dtype, given)
        null_values = markers_of if markers_of or given is not None else None
        found[i] = ColumnType(dtype, (), null_values, 0)
    return found


def plain_text_columns(
    columns: Sequence[Sequence[pa.Array]], given: tuple[str, ...] | None = None
) -> dict[int, ColumnType]:
    """The columns whose sampled values are plain text, typed at once; by position.

    A column is plain text when it has values and none of them is a number, true or false, a
    missing-value marker (pandas' or `given`) or a one-token marker (`markers.TOKEN`):
    `infer_column` gives such a column bytes, its markers (`given`) and no note, and so does
    this, with a few Arrow calls over all the columns' values (a table of 1,000 text columns
    spent 0.15 s in `infer_column`). The others are left out.
    """
    labelled = _labelled(columns)
    if labelled is None:
        return {}
    values, labels = labelled
    markers = pa.array(sorted(set(DEFAULT_MARKERS) | set(given or ())), pa.string())
    plain = np.bincount(labels, _flags(pc.is_valid(values)), len(columns)) > 0
    for mask in (
        pc.match_substring_regex(values, NUMBER),
        pc.match_substring_regex(values, BOOLEAN),
        pc.match_substring_regex(values, TOKEN),
        pc.is_in(values, value_set=markers),
    ):
        plain &= np.bincount(labels, _flags(mask), len(columns)) == 0
    return {i: ColumnType("bytes", (), given, 0) for i in np.flatnonzero(plain).tolist()}


def number_columns(
    columns: Sequence[pa.Array | pa.ChunkedArray], markers: Sequence[str]
) -> list[int]:
    """The positions of the columns (texts, null when empty) whose values, at least three,
    are numbers or markers (`markers`, one-token ones) by `NUMERIC_SHARE`, most of them
    numbers: what the rows write as numbers before types are inferred."""
    chunks = [chunk.cast(pa.string()) for column in columns for chunk in _chunks(column)]
    if not chunks:
        return []
    values = pa.chunked_array(chunks, pa.string()).combine_chunks()
    labels = np.repeat(np.arange(len(columns)), [len(column) for column in columns])
    valid = _flags(pc.is_valid(values))
    number = _flags(pc.match_substring_regex(values, NUMBER))
    fits = (
        number
        | _flags(pc.is_in(values, value_set=pa.array(sorted(set(markers)), pa.string())))
        | _flags(pc.match_substring_regex(values, TOKEN))
    )
    counts = np.bincount(labels, weights=valid, minlength=len(columns))
    fitting = np.bincount(labels, weights=valid & fits, minlength=len(columns))
    numbers = np.bincount(labels, weights=valid & number, minlength=len(columns))
    share = np.divide(fitting, counts, out=np.zeros(len(columns)), where=counts > 0)
    keep = (counts >= _LEAST_VALUES) & (share >= NUMERIC_SHARE) & (2 * numbers >= counts)
    return np.flatnonzero(keep).tolist()


_LEAST_VALUES = 3  # values of a column for `number_columns` to call it one of numbers


def _labelled(columns: Sequence[Sequence[pa.Array]]) -> tuple[pa.Array, np.ndarray] | None:
    """Every column's sampled texts end to end, and each value's column (None: no values)."""
    chunks = [chunk for column in columns for array in column for chunk in _chunks(array)]
    if not chunks:
        return None
    values = pa.chunked_array(chunks, pa.string()).combine_chunks()
    sizes = [sum(len(array) for array in column) for column in columns]
    return values, np.repeat(np.arange(len(columns)), sizes)


def _chunks(array: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


def _flags(mask: pa.Array) -> np.ndarray:
    """A boolean Arrow array as NumPy, null as False."""
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def _beyond_int64(integers: pa.Array) -> pa.Array:
    """The integers (as written) that int64 cannot hold: the examples a note shows. Only
    those of 19 bytes or more can be, and are few: each is read by Python."""
    long = integers.filter(pc.greater_equal(pc.binary_length(integers), 19))
    beyond = [not -(2**63) <= int(v) < 2**63 for v in long.to_pylist()]
    return long.filter(pa.array(beyond, pa.bool_()))


def _fit_int64(texts: pa.Array) -> bool:
    """Whether integers as written all read as int64, as the writers read them (spaces
    and a leading '+' trimmed first: `casting._normalized`)."""
    plain = pc.replace_substring_regex(pc.utf8_trim_whitespace(texts), r"^\+", "")
    try:
        pc.cast(plain, pa.int64())
    except pa.ArrowInvalid:
        return False
    return True
