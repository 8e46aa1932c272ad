"""Typed Arrow columns (from JSON, Parquet or decoded Examples) to and from feature specs.

Inference maps Arrow types to Example dtypes: integers and booleans -> int64, floats and
decimals -> float32, strings and binaries -> bytes, dates and times -> int64 in one unit per
feature, recorded as its `logical_type` (days for dates, microseconds for timestamps, times and
durations, whatever unit each file stored), lists of those -> variable-length features.
Structs are flattened into dotted names first (`a.b`).

`conform` casts a batch to the spec column by column, all at once; only a column that fails is
looked at value by value, to name the rows at fault. A row that contradicts the spec (a value of
another type, a list where one value is expected, a fixed-length feature with another count) is
reported, never a crash, so the writer can dead-letter it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.codec.examples import VALUE_TYPES, is_list
from beam_jobs.core.errors import DataError
from beam_jobs.schema.precision import Float32Changes
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "as_one_value_lists",
    "check_float32_range",
    "conform",
    "example_dtype",
    "flatten_structs",
    "infer_from_table",
    "list_parts",
    "logical_arrow_type",
    "logical_type_of",
    "merge_features",
    "missing_count",
    "one_layout",
    "temporal_integers",
]


def example_dtype(arrow_type: pa.DataType) -> str | None:
    """The Example dtype of an Arrow scalar type; None for the null type (nothing known yet).

    Raises:
      TypeError: for a type no Example feature can hold (a struct, a map, a nested list).
    """
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_null(arrow_type):
        return None
    if (
        pa.types.is_integer(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_temporal(arrow_type)
    ):
        return "int64"
    if pa.types.is_decimal(arrow_type):
        # Exact: whole numbers that fit int64 as int64, others as their decimal text (float32
        # would keep about 7 digits of a price or a 20-digit id); `--schema` can ask for float32.
        exact_int = arrow_type.scale == 0 and arrow_type.precision <= 18
        return "int64" if exact_int else "bytes"
    if pa.types.is_floating(arrow_type):
        return "float32"
    if (
        pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_fixed_size_binary(arrow_type)
    ):
        return "bytes"
    raise TypeError(f"{arrow_type} has no tf.train.Example equivalent")


def flatten_structs(table: pa.Table) -> pa.Table:
    """Struct columns become one column per field, named `parent.field`, at every depth."""
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    return table


def list_parts(column: pa.ListArray) -> tuple[pa.Array, pa.Array]:
    """Offsets from 0 and exactly the values they cover, also for a slice of a larger array."""
    offsets = column.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, first), column.values.slice(first, last - first)


def _lengths(column: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)


def logical_type_of(arrow_type: pa.DataType) -> str | None:
    """The logical type an int64 feature records for a date or time Arrow type (None: not
    one): dates in days, the others in microseconds, a timestamp's time zone kept."""
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_timestamp(arrow_type):
        return str(pa.timestamp("us", tz=arrow_type.tz))
    if pa.types.is_date(arrow_type):
        return str(pa.date32())
    if pa.types.is_time(arrow_type):
        return str(pa.time64("us"))
    if pa.types.is_duration(arrow_type):
        return str(pa.duration("us"))
    return None


def logical_arrow_type(logical_type: str) -> pa.DataType:
    """The Arrow type a logical type names (see `FeatureSpec.logical_type`)."""
    if logical_type == "date32[day]":
        return pa.date32()
    kind, _, rest = logical_type.partition("[")
    unit, _, zone = rest.rstrip("]").partition(", tz=")
    if kind == "timestamp":
        return pa.timestamp(unit, tz=zone or None)
    return pa.time64(unit) if kind == "time64" else pa.duration(unit)


def infer_from_table(table: pa.Table, scalar_lists: bool = False) -> list[FeatureSpec]:
    """Feature specs for a sample's (flattened) columns.

    Args:
      table: typed columns, structs already flattened.
      scalar_lists: infer the shape of list columns from the sample (`[]` when every row has
        one value, `[k]` when every row has k) instead of variable length; for decoded
        Examples, whose features are all lists.

    Raises:
      DataError: naming a column whose type no Example feature can hold.
    """
    features = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        column = column.combine_chunks()
        listed = is_list(column.type)
        try:
            dtype = example_dtype(column.type.value_type if listed else column.type)
        except TypeError as e:
            raise DataError(
                f"column {name!r}: {e} (a list of lists or of objects cannot be a feature; "
                "flatten it upstream or leave it out with --schema)"
            ) from None
        shape: list[int] | None = [] if not listed else None
        logical = logical_type_of(column.type.value_type if listed else column.type)
        nullable = column.null_count > 0
        if listed:
            lengths = _lengths(column)
            nullable = nullable or bool((lengths == 0).any())
            present = lengths[lengths > 0]
            if scalar_lists and present.size and (present == present[0]).all():
                shape = [] if present[0] == 1 else [int(present[0])]
        features.append(
            FeatureSpec(name, dtype or "bytes", shape, nullable or dtype is None, logical)
        )
    return features


def merge_features(
    per_sample: Sequence[Sequence[FeatureSpec]], overrides: Sequence[FeatureSpec] = ()
) -> list[FeatureSpec]:
    """One spec from several samples' specs: every column seen, types widened, overrides last.

    int64 and float32 widen to float32; anything with bytes becomes bytes; shapes that differ
    become variable length; a column missing from some sample is nullable.
    """
    order: list[str] = []
    seen: dict[str, list[FeatureSpec]] = {}
    for specs in per_sample:
        for spec in specs:
            if spec.name not in seen:
                order.append(spec.name)
            seen.setdefault(spec.name, []).append(spec)
    by_name = {f.name: f for f in overrides}
    merged = []
    for name in order:
        specs = seen[name]
        if name in by_name:
            merged.append(_with_inferred_unit(by_name[name], specs))
            continue
        dtypes = {s.dtype for s in specs}
        dtype = "bytes" if "bytes" in dtypes else "float32" if "float32" in dtypes else "int64"
        shapes = [s.shape for s in specs]
        shape = shapes[0] if all(s == shapes[0] for s in shapes) else None
        nullable = any(s.nullable for s in specs) or len(specs) < len(per_sample)
        logical = (
            _merged_logical(name, [s.logical_type for s in specs]) if dtype == "int64" else None
        )
        merged.append(FeatureSpec(name, dtype, shape, nullable, logical))
    unknown = sorted(set(by_name) - set(order))
    merged.extend(by_name[n] for n in unknown)  # a schema may name columns the sample lacked
    return merged


def _with_inferred_unit(override: FeatureSpec, specs: Sequence[FeatureSpec]) -> FeatureSpec:
    """A --schema `int64` for a column the samples hold as dates or times keeps their unit
    (days, microseconds), as without --schema: else each file's own unit (ms in one, us in
    another) or seconds would land in one feature, with no unit recorded."""
    if override.dtype != "int64" or override.logical_type is not None:
        return override
    units = [s.logical_type for s in specs if s.logical_type is not None]
    if not units:
        return override
    return dataclasses.replace(override, logical_type=_merged_logical(override.name, units))


def _merged_logical(name: str, logical_types: Sequence[str | None]) -> str | None:
    """One logical type for a column the samples typed alike, or a DataError naming it."""
    found = set(logical_types)
    if len(found) == 1:
        return found.pop()
    if all(t is not None and t.startswith("timestamp") for t in found):
        # Time zones differ: the values are all microseconds since the epoch in UTC.
        return "timestamp[us, tz=UTC]"
    raise DataError(
        f"column {name!r} holds {' and '.join(sorted(str(t) for t in found))} values in "
        "different input files; convert them to one type upstream, or set it with --schema"
    )


def missing_count(column: pa.Array) -> int:
    """Rows with no value: nulls, and empty lists for a list column."""
    if is_list(column.type):
        return int((_lengths(column) == 0).sum())
    return column.null_count


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32_range(values: pa.Array) -> None:
    """Raises ArrowInvalid when a finite value would become infinite as float32 (`1e40`). A
    number below its range (`1e-50`) is stored as 0 and counted (`Float32Changes`): a
    difference no float32 computation can see, where a dead letter would lose the row."""
    if len(values) == 0 or not pa.types.is_floating(values.type):
        return  # integers are int64 features: no float32 in sight (and 2**53+ cannot compare)
    # NumPy over the values (nulls read as NaN, which is neither): a few passes in C, where
    # Arrow's kernels cost a call each, paid per column of every batch.
    wide = values.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        too_big = np.abs(wide) > _FLOAT32_MAX  # inf is not finite: never above
    too_big &= np.isfinite(wide)
    if too_big.any():
        first = float(wide[too_big][0])
        raise pa.ArrowInvalid(f"{first!r} is out of the float32 range (at most 3.4e38)")


def temporal_integers(column: pa.Array, logical_type: str) -> pa.Array:
    """Dates or times (or ISO 8601 text) as the integers the logical type counts; raises
    ArrowInvalid for a value the type cannot hold exactly (a nanosecond in microseconds, a
    time of day in a date)."""
    target = logical_arrow_type(logical_type)
    if pa.types.is_timestamp(target) and (
        pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
    ):
        return pc.cast(_text_timestamps(column, target.unit), pa.int64())
    typed = pc.cast(column, target)  # safe for units, but a date drops a timestamp's time
    if pa.types.is_temporal(column.type) and column.type != target:
        back = pc.cast(typed, column.type)
        changed = pc.fill_null(pc.not_equal(back, column), False)
        if pc.any(changed).as_py():
            first = column.filter(changed)[0]
            raise pa.ArrowInvalid(f"{first} is not exactly a {target} value (the feature's type)")
    if pa.types.is_date32(typed.type):
        return pc.cast(pc.cast(typed, pa.int32()), pa.int64())
    return pc.cast(typed, pa.int64())


# ISO 8601 text whose time of day ends in a zone: Z, +02:00, -0530 (a date's "-31" is no zone).
_ZONED = r"\d\d:\d\d(:\d\d(\.\d*)?)?\s*(Z|[+-]\d\d(:?\d\d)?)$"


def _text_timestamps(text: pa.Array, unit: str) -> pa.Array:
    """ISO 8601 text as a naive timestamp in UTC, with or without a zone in each value (as
    pyarrow's JSON reader reads them: `...Z` and `...+02:00` are instants, converted to UTC;
    text without a zone is taken as UTC). Arrow's own cast takes one kind per column only.
    Raises ArrowInvalid for text that is not a timestamp."""
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONED), False)
    naive = pa.timestamp(unit)
    if not pc.any(zoned).as_py():
        return pc.cast(text, naive)
    nothing = pa.scalar(None, text.type)
    aware = pc.cast(pc.if_else(zoned, text, nothing), pa.timestamp(unit, tz="UTC"))
    plain = pc.cast(pc.if_else(zoned, nothing, text), naive)
    return pc.if_else(zoned, pc.cast(aware, naive), plain)


def _iso_text(column: pa.Array) -> pa.Array:
    """Dates and times as ISO 8601 text (`--schema` asks for bytes): `2026-01-31`,
    `2026-01-31T08:30:00` (fractions of a second as the unit holds them, `Z` for UTC)."""
    if pa.types.is_timestamp(column.type):
        zone = "%z" if column.type.tz else ""
        text = pc.strftime(column, format=f"%Y-%m-%dT%H:%M:%S{zone}")
        return pc.replace_substring_regex(text, r"\+0000$", "Z") if zone else text
    return pc.cast(column, pa.string())


def _cast_values(column: pa.Array, dtype: str, logical_type: str | None = None) -> pa.Array:
    """Casts scalars (or a list's values) to the Example type; raises ArrowInvalid."""
    target = VALUE_TYPES[dtype]
    if len(column) == 0:
        return pa.array([], target)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if dtype == "int64":
        return _cast_integers(column, logical_type)
    if dtype == "bytes" and pa.types.is_decimal(column.type):
        return pc.cast(pc.cast(column, pa.string()), target)
    if dtype == "bytes" and pa.types.is_temporal(column.type):
        return pc.cast(_iso_text(column), target)
    if dtype == "float32" and _is_text(column.type) and column.null_count < len(column):
        # "2.5" or "NaN" written as text is not a number of the file's own (CSV aside, which
        # reads its text by its own rules before this).
        raise pa.ArrowInvalid(f"text where a number is expected ({column.type})")
    if dtype == "float32":
        # Safe to float64 first (no silent int overflow), then round like tf.train.FloatList;
        # a value float32 cannot hold at all is an error, not an infinity.
        wide = pc.cast(column, pa.float64())
        check_float32_range(wide)
        return pc.cast(wide, target, safe=False)
    if dtype == "bytes" and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise pa.ArrowInvalid(f"a number where text is expected ({column.type})")
    return pc.cast(column, target)


def _is_text(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _cast_integers(column: pa.Array, logical_type: str | None) -> pa.Array:
    """`_cast_values` to int64: dates and times only with a logical type saying their unit."""
    target = VALUE_TYPES["int64"]
    temporal_source = pa.types.is_temporal(column.type) or (
        pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
    )
    if logical_type and temporal_source:
        return temporal_integers(column, logical_type)
    if logical_type and column.null_count < len(column):
        # A number is not a date: 1704103200 would be read as microseconds (1970-01-01).
        raise pa.ArrowInvalid(f"a value of type {column.type} where {logical_type} is expected")
    if pa.types.is_temporal(column.type):
        # Only a logical type says which unit the integers count (handled above).
        if column.null_count == len(column):
            return pa.nulls(len(column), target)
        raise pa.ArrowInvalid(
            f"a {column.type} value where the feature holds plain integers, not dates or times"
        )
    if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
        raise pa.ArrowInvalid(f"text where an integer is expected ({column.type})")
    return pc.cast(column, target)


def _conform_column(column: pa.Array, feature: FeatureSpec) -> pa.Array:
    """One column cast to its feature; raises ValueError (incl. ArrowInvalid) when it cannot be."""
    listed = is_list(column.type)
    if not listed:
        if feature.shape not in ([], None):
            raise ValueError(f"one value where {feature.shape[0]} are expected")
        return _cast_values(column, feature.dtype, feature.logical_type)
    if pa.types.is_fixed_size_list(column.type) or pa.types.is_large_list(column.type):
        column = pc.cast(column, pa.list_(column.type.value_type))
    if feature.shape is not None:
        want = 1 if feature.shape == [] else feature.shape[0]
        lengths = _lengths(column)
        wrong = (lengths != want) & (lengths != 0)
        if wrong.any():
            raise ValueError(f"{int(lengths[wrong][0])} values where {want} are expected")
    offsets, values = list_parts(column)
    if values.null_count:
        # An Example list has no place for a missing element: it would become 0 or b"".
        raise ValueError("a list with a null element, which an Example list cannot hold")
    return pa.ListArray.from_arrays(
        offsets, _cast_values(values, feature.dtype, feature.logical_type), mask=column.is_null()
    )


def conform(
    table: pa.Table | pa.RecordBatch,
    features: Sequence[FeatureSpec],
    changes: Float32Changes | None = None,
) -> tuple[pa.RecordBatch, dict[int, str]]:
    """The rows of `table` cast to `features`; returns the good rows and {bad row: reason}.

    A feature the table lacks is missing (null) in every row. Scalar sources give scalar
    columns and list sources list columns, both of the feature's Arrow value type. `changes`
    counts, by float32 feature, what float32 changes of the good rows' values.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    table = flatten_structs(table)
    n = table.num_rows
    columns: dict[str, pa.Array] = {}
    for feature in features:
        if feature.name in table.column_names:
            columns[feature.name] = table.column(feature.name).combine_chunks()
        else:
            columns[feature.name] = pa.nulls(n, VALUE_TYPES[feature.dtype])
    bad: dict[int, str] = {}
    for feature in features:
        try:
            _conform_column(columns[feature.name], feature)
        except (ValueError, pa.ArrowNotImplementedError):
            for index, reason in _failing_rows(columns[feature.name], feature).items():
                bad.setdefault(index, f"feature {feature.name!r} ({_describe(feature)}): {reason}")
    keep = None if not bad else pa.array([i not in bad for i in range(n)])
    names = [f.name for f in features]
    arrays = []
    for feature in features:
        column = columns[feature.name] if keep is None else columns[feature.name].filter(keep)
        if changes is not None and feature.dtype == "float32":
            changes.count(feature.name, column)
        arrays.append(_conform_column(column, feature))
    return pa.RecordBatch.from_arrays(arrays, names), bad


_FEW_ROWS = 16  # below this many rows, values are cast one by one


def _failing_rows(values: pa.Array, feature: FeatureSpec, offset: int = 0) -> dict[int, str]:
    """{row: reason} for the values of a column that fail to conform: halves that conform are
    done with in one cast each, so a few bad values among many cost a few dozen casts, not one
    cast per row."""
    try:
        _conform_column(values, feature)
        return {}
    except (ValueError, pa.ArrowNotImplementedError) as e:
        if len(values) == 1:
            return {offset: str(e)}
    if len(values) <= _FEW_ROWS:
        found: dict[int, str] = {}
        for index in range(len(values)):
            found |= _failing_rows(values.slice(index, 1), feature, offset + index)
        return found
    half = len(values) // 2
    return _failing_rows(values.slice(0, half), feature, offset) | _failing_rows(
        values.slice(half), feature, offset + half
    )


def _describe(feature: FeatureSpec) -> str:
    shape = "variable length" if feature.shape is None else f"shape {feature.shape}"
    return f"{feature.dtype}, {shape}"


def one_layout(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """Conformed batches in one layout (to join them): a feature given one value in some rows
    and a list in others (`"tags": 1`, `"tags": [1, 2]`) is a list column in every batch
    (the record holds the same values either way)."""
    listed = {
        name
        for batch in batches
        for name, kind in zip(batch.schema.names, batch.schema.types, strict=True)
        if is_list(kind)
    }
    if all(batch.schema == batches[0].schema for batch in batches) or not listed:
        return batches
    made = []
    for batch in batches:
        columns = [
            as_one_value_lists(column) if name in listed and not is_list(column.type) else column
            for name, column in zip(batch.schema.names, batch.columns, strict=True)
        ]
        made.append(pa.RecordBatch.from_arrays(columns, batch.schema.names))
    return made


def as_one_value_lists(column: pa.Array) -> pa.Array:
    """One value a row as a list of it (a missing value stays missing)."""
    offsets = pa.array(np.arange(len(column) + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, column, mask=column.is_null())
