"""The type of a CSV column, from its sampled values as written, with the reasons said aloud.

pyarrow's own inference alone is silently wrong on real files: it reads `01234` (ZIP, FIPS
codes) as 1234, a 20-digit id as a rounded float, makes a whole column text because of one
`n/a` in the sampled head (so no later row is ever a bad row), and says nothing when a float
column needs more digits than float32 keeps. The rules here, on the sampled texts:

- `true`/`false` (any case) only: int64 1/0, as JSON booleans convert;
- numbers only, or at least 99% numbers: int64 when all are integers, else float32 (the rest
  are bad rows when written, and a warning names how many and shows a few);
- but text (bytes) when a number is written with a leading zero, or an integer does not fit
  int64: such values are codes and ids, kept exactly as written;
- a float32 column with values of more than 7 significant digits gets a warning (float32 keeps
  about 7), naming the `--schema` choices that keep them exact.
"""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BOOLEAN",
    "INTEGER",
    "NUMBER",
    "NUMERIC_SHARE",
    "ColumnType",
    "infer_column",
    "schema_hint",
]

NUMERIC_SHARE = 0.99  # of the sampled non-empty values, for a column to be a number column
_MOSTLY_NUMBERS = 0.9  # below NUMERIC_SHARE but above this: text, with a warning
# What the writers parse (`ranges.parse_numbers`): spaces around a value are allowed.
INTEGER = r"^\s*[+-]?\d+\s*$"
NUMBER = r"(?i)^\s*[+-]?((\d+\.?\d*|\.\d+)(e[+-]?\d+)?|inf|infinity|nan)\s*$"
BOOLEAN = r"(?i)^\s*(true|false)\s*$"
_LEADING_ZERO = r"^\s*[+-]?0\d"
_FLOAT32_DIGITS = 7


@dataclasses.dataclass(frozen=True)
class ColumnType:
    """A column's Example dtype, and what the user should know about how it was chosen."""

    dtype: str
    warnings: tuple[str, ...] = ()


def schema_hint(name: str, dtype: str) -> str:
    """How to give a column its type: a line of a --schema file (`{"features": [...]}`)."""
    return f'add {json.dumps({"name": name, "dtype": dtype})} to the "features" of a --schema file'


def _examples(values: pa.Array, limit: int = 3) -> str:
    return ", ".join(repr(v) for v in pc.unique(values).slice(0, limit).to_pylist())


def _significant_digits(values: pa.Array) -> pa.Array:
    """Digits that carry information in each number as written (sign, point, exponent and
    leading or trailing zeros aside)."""
    digits = pc.replace_substring_regex(values, r"(?i)e.*$", "")
    digits = pc.replace_substring_regex(digits, r"[^0-9]", "")
    digits = pc.replace_substring_regex(digits, r"^0+|0+$", "")
    return pc.utf8_length(digits)


def infer_column(name: str, texts: pa.Array) -> ColumnType:
    """The type of a column from its sampled non-empty values, as written (strings)."""
    if len(texts) == 0:
        return ColumnType("bytes")
    if pc.all(pc.match_substring_regex(texts, BOOLEAN)).as_py():
        return ColumnType("int64")
    is_number = pc.match_substring_regex(texts, NUMBER)
    numbers = texts.filter(is_number)
    share = len(numbers) / len(texts)
    if share < NUMERIC_SHARE:
        if share < _MOSTLY_NUMBERS:
            return ColumnType("bytes")
        others = texts.filter(pc.invert(is_number))
        whole = pc.all(pc.match_substring_regex(numbers, INTEGER)).as_py()
        return ColumnType(
            "bytes",
            (
                f"column {name!r} is {share:.0%} numbers, but {len(others):,} of "
                f"{len(texts):,} sampled values are not (e.g. {_examples(others)}): read as "
                f"text (bytes); to read numbers (the others then go to the dead letter), "
                f"{schema_hint(name, 'int64' if whole else 'float32')}",
            ),
        )
    warnings = []
    codes = numbers.filter(pc.match_substring_regex(numbers, _LEADING_ZERO))
    if len(codes):
        return ColumnType(
            "bytes",
            (
                f"column {name!r} has numbers written with leading zeros (e.g. "
                f"{_examples(codes)}): read as text (bytes), so codes such as ZIP codes stay "
                "as written (an int64 column would send such values to the dead letter)",
            ),
        )
    integral = pc.all(pc.match_substring_regex(numbers, INTEGER)).as_py()
    if integral:
        # The writers trim spaces and a leading '+' before casting (`ranges._normalized`).
        plain = pc.replace_substring_regex(pc.utf8_trim_whitespace(numbers), r"^\+", "")
        try:
            pc.cast(plain, pa.int64())
        except pa.ArrowInvalid:
            return ColumnType(
                "bytes",
                (
                    f"column {name!r} has integers beyond the int64 range (e.g. "
                    f"{_examples(numbers)}): read as text (bytes), as no Example number type "
                    "holds them exactly",
                ),
            )
    dtype = "int64" if integral else "float32"
    if share < 1:
        others = texts.filter(pc.invert(is_number))
        warnings.append(
            f"column {name!r}: {len(others):,} of {len(texts):,} sampled values are not "
            f"numbers (e.g. {_examples(others)}): read as {dtype}, and such rows go to the dead "
            f"letter; to keep the column as text, {schema_hint(name, 'bytes')}"
        )
    if dtype == "float32":
        long = numbers.filter(pc.greater(_significant_digits(numbers), _FLOAT32_DIGITS))
        if len(long):
            warnings.append(
                f"column {name!r} has values with more significant digits than float32 keeps "
                f"(e.g. {_examples(long)}): they are rounded to about {_FLOAT32_DIGITS} digits; "
                f"to keep them exact, {schema_hint(name, 'bytes')} (or int64 for whole numbers)"
            )
    return ColumnType(dtype, tuple(warnings))
