"""Plan-time notes for numbers that `float32` (the only float a `tf.train.Example` holds)
cannot keep as written, for formats whose numbers arrive as doubles (JSON lines, Parquet).

A value is kept when float32's shortest decimal form reads back as the same double: `0.1` is
kept (float32 prints it as `0.1`), `47.3768866` is not (`47.376885`). CSV numbers are judged on
their text instead (`formats/csv/inference.py`).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.codec.examples import TOGETHER_MAX_ROWS, TOGETHER_MIN_COLUMNS, number_groups
from beam_jobs.schema.type_notes import TypeNote, log_notes
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "FLOAT32_ROUNDING",
    "LOOKED_AT",
    "Float32Changes",
    "float32_changes",
    "float32_changes_of",
    "float32_notes",
    "rounded_integers",
    "warn_float32_rounding",
    "zeroed_numbers",
]

_EXACT_IN_FLOAT32 = 2.0**24  # every whole number up to this is a float32 exactly
_INT64_BOUND = 2.0**63  # whole numbers from here on are no int64
# float32 rounds every number of at most this size to 0 (half its smallest subnormal, 2**-149,
# and ties go to the even 0): below its range.
_ZERO_IN_FLOAT32 = 2.0**-150

LOOKED_AT = 10_000  # sampled values per feature: enough to show the problem, cheap to check
_log = logging.getLogger(__name__)


FLOAT32_ROUNDING = (
    "float32 keeps about 7 significant digits, as TensorFlow does: longer decimals are "
    "rounded; the dtype bytes in a --schema file keeps them as written"
)


def float32_notes(
    features: Sequence[FeatureSpec], values_of: Mapping[str, Iterable[object]]
) -> list[TypeNote]:
    """A note per float32 feature whose sampled values float32 would round (an info line:
    ordinary for decimals; whole numbers float32 changes are counted while writing).

    Args:
      features: the planned features.
      values_of: each feature's sampled values (numbers, lists of numbers, None, others).
    """
    found = []
    for feature in features:
        if feature.dtype != "float32" or feature.name not in values_of:
            continue
        numbers = np.array(_numbers(values_of[feature.name]), dtype=np.float64)
        numbers = numbers[np.isfinite(numbers)]
        rounded = numbers.astype(np.float32).astype(str).astype(np.float64)
        changed = numbers[rounded != numbers]
        if not len(changed):
            continue
        examples = ", ".join(repr(v) for v in list(dict.fromkeys(changed.tolist()))[:3])
        found.append(TypeNote(FLOAT32_ROUNDING, feature.name, f"e.g. {examples}", warning=False))
    return found


def warn_float32_rounding(
    features: Sequence[FeatureSpec], values_of: Mapping[str, Iterable[object]]
) -> None:
    """Logs `float32_notes` (at plan time, with the format's other notes)."""
    log_notes(float32_notes(features, values_of), _log)


def rounded_integers(column: pa.Array | pa.ChunkedArray) -> int:
    """How many whole numbers of a number column (or list column of numbers) float32 changes
    (16777217 becomes 16777216): counted while writing, as the plan's warning sees only the
    sample. Whole numbers up to 2**24 are exact in float32: most columns cost one pass."""
    column = _flat(column)
    floating = pa.types.is_floating(column.type)
    if not (floating or pa.types.is_integer(column.type)):
        return 0
    values = column.drop_null().to_numpy(zero_copy_only=False)
    if not len(values):
        return 0
    big = values[np.abs(values.astype(np.float64)) > _EXACT_IN_FLOAT32]
    if not len(big):
        return 0  # the common case
    if floating:
        # Past int64's range a double is whole but no integer anyone wrote (3e38): float32
        # rounds it as it rounds decimals (the plan's note), and int64 could not hold it.
        big = big.astype(np.float64)
        whole = np.isfinite(big) & (np.floor(big) == big) & (np.abs(big) < _INT64_BOUND)
        return int(np.count_nonzero(whole & (big.astype(np.float32).astype(np.float64) != big)))
    # Integers: exactly, whatever their size (float64 holds them exactly only up to 2**53).
    return sum(int(np.float32(v)) != int(v) for v in big.tolist())


def zeroed_numbers(column: pa.Array | pa.ChunkedArray) -> int:
    """How many numbers other than 0 of a number column (or list column) float32 stores as 0:
    below its range (`1e-50`; its smallest number is 1.4e-45). Counted while writing."""
    column = _flat(column)
    if not pa.types.is_floating(column.type) or column.type == pa.float32():
        return 0  # integers are never that small; a float32 already holds what is stored
    values = np.abs(column.to_numpy(zero_copy_only=False))  # nulls are NaN: never counted
    return int(np.count_nonzero((values <= _ZERO_IN_FLOAT32) & (values > 0)))


def float32_changes_of(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    min_columns: int = TOGETHER_MIN_COLUMNS,
    max_rows: int = TOGETHER_MAX_ROWS,
) -> list[tuple[int, int]]:
    """`rounded_integers` and `zeroed_numbers` of each column. The columns of
    `number_groups` are looked at a group at a time first: when none holds a number past
    2**24 or below float32's range (most data), none has one float32 changes, in one pass
    over them all instead of a few calls a column (5,000 columns of 453 rows: 34 ms a batch,
    5 ms together)."""
    counts: list[tuple[int, int] | None] = [None] * len(columns)
    for members in number_groups(columns, [0] * len(columns), min_columns, max_rows):
        joined = np.abs(pa.concat_arrays([columns[i] for i in members]).to_numpy())
        joined = joined.astype(np.float64, copy=False)
        if not np.any(joined > _EXACT_IN_FLOAT32) and not np.any(
            (joined <= _ZERO_IN_FLOAT32) & (joined > 0)
        ):
            for i in members:
                counts[i] = (0, 0)
    return [float32_changes(c) if n is None else n for c, n in zip(columns, counts, strict=True)]


def float32_changes(column: pa.Array | pa.ChunkedArray) -> tuple[int, int]:
    """(`rounded_integers`, `zeroed_numbers`) of a column: one look at its values first, as
    most columns hold neither (a few calls fewer a column of every batch)."""
    column = _flat(column)
    floating = pa.types.is_floating(column.type)
    if not (floating or pa.types.is_integer(column.type)):
        return 0, 0
    values = np.abs(column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False))
    big = bool(np.any(values > _EXACT_IN_FLOAT32))  # NaN (a null) is neither
    tiny = (
        floating
        and column.type != pa.float32()
        and bool(np.any((values <= _ZERO_IN_FLOAT32) & (values > 0)))
    )
    return (rounded_integers(column) if big else 0, zeroed_numbers(column) if tiny else 0)


@dataclasses.dataclass
class Float32Changes:
    """What float32 changed of the values written, by float32 feature: whole numbers it
    rounded (16777217 -> 16777216) and numbers below its range it stored as 0 (1e-50)."""

    rounded: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    zeroed: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def count(self, name: str, column: pa.Array | pa.ChunkedArray) -> None:
        """Counts the changes float32 makes to `column`'s values (before the cast)."""
        rounded, zeroed = float32_changes(column)
        self.rounded[name] += rounded
        self.zeroed[name] += zeroed


def _flat(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column's values in one array: a list column's, flattened."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        column = pc.list_flatten(column)
    return column


def _numbers(values: Iterable[object]) -> list[float]:
    out: list[float] = []
    for value in values:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                out.append(float(item))
                if len(out) >= LOOKED_AT:
                    return out
    return out
