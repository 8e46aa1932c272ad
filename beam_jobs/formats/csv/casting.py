"""A batch of CSV text columns cast to the feature spec's types, whole columns at once; only a
column that fails is looked at value by value, to name its bad rows and their reasons.
Missing-value markers become nulls, counted by column."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.core.bad_rows import as_text
from beam_jobs.formats.csv.encoding_hint import not_utf8
from beam_jobs.formats.csv.inference import schema_hint
from beam_jobs.formats.csv.markers import (
    readable_as,
    value_counts,
    without_markers,
    without_tokens,
)
from beam_jobs.formats.csv.numbers import BOOLEAN, NUMBER, reads_as
from beam_jobs.schema.conform import check_float32_range, temporal_integers
from tfdata_reader.manifest import FeatureSpec

__all__ = ["cells", "check_float64_range", "typed_batch"]

# Arrow types each Example dtype is converted from. Floats are parsed as float64 and rounded to
# float32 afterwards, exactly as `float(text)` into a `tf.train.FloatList` would.
_EXACT_INTEGER = r"^\s*[+-]?(0|[1-9]\d*)\s*$"  # no leading zero, not hexadecimal
_PARSE_TYPES = {"int64": pa.int64(), "float32": pa.float64(), "bytes": pa.string()}


def cells(batch: pa.RecordBatch, indices: Sequence[int]) -> list[dict[str, Any]]:
    """The dead-letter content of the rows at `indices`: their cells by column, as text."""
    taken = batch.take(pa.array(indices, pa.int64()))
    names = batch.schema.names
    columns = [_texts(column) for column in taken.columns]
    return [{"cells": dict(zip(names, row, strict=True))} for row in zip(*columns, strict=True)]


def _texts(column: pa.Array) -> list[Any]:
    """A binary column's values as text (`as_text`), cast whole when it is all UTF-8."""
    try:
        return column.cast(pa.string()).to_pylist()
    except pa.ArrowInvalid:
        return [as_text(value) for value in column.to_pylist()]


def _normalized(text: pa.Array, dtype: str) -> pa.Array:
    """Numbers as Arrow's casts take them: no spaces around, no `+` on integers, true/false
    as 1/0 (only reached when the plain cast failed, so clean columns pay nothing)."""
    text = pc.utf8_trim_whitespace(text)
    if dtype == "int64":
        text = pc.replace_substring_regex(text, r"^\+(\d)", r"\1")  # not '+-1'
        text = pc.replace_substring_regex(text, r"(?i)^true$", "1")
        text = pc.replace_substring_regex(text, r"(?i)^false$", "0")
    return text


_FAILED_VALUE = re.compile(r"^Failed to parse string: '(.*)' as a scalar of type", re.DOTALL)


def _may_normalize(error: pa.ArrowInvalid, dtype: str) -> bool:
    """Whether normalizing a column (trimming, `+1`, true/false) could make its cast pass: not
    when the value the cast stopped at is no number even so (`unknown`), which spares a dirty
    column four passes over its text."""
    failed = _FAILED_VALUE.match(str(error))
    return failed is None or reads_as(failed.group(1), dtype)


def _convert(column: pa.Array, feature: FeatureSpec) -> pa.Array:
    """A binary column as the Arrow type the Example dtype is built from; raises ArrowInvalid.
    With a logical type (`--schema` asks for dates as int64), ISO text becomes its integers."""
    dtype = feature.dtype
    if dtype == "bytes":
        return pc.cast(column, pa.string())  # validates UTF-8
    if feature.logical_type:
        text = pc.utf8_trim_whitespace(pc.cast(column, pa.string()))
        return temporal_integers(text, feature.logical_type)
    # Numbers need no UTF-8 check of their own: bytes that are not digits fail to parse anyway.
    text = column.view(pa.string())
    try:
        parsed = pc.cast(text, _PARSE_TYPES[dtype])
    except pa.ArrowInvalid as e:
        if not _may_normalize(e, dtype):
            raise
        parsed = pc.cast(_normalized(text, dtype), _PARSE_TYPES[dtype])
    if dtype == "int64" and pc.any(pc.match_substring_regex(text, _ALTERED_INTEGER)).as_py():
        # Arrow reads '0x1F' as 31 and '01000' as 1000: a code's zeros (or a hex value) would
        # be altered without a word, so such values are bad rows (found by `_bad_rows`).
        raise pa.ArrowInvalid("an integer with a leading zero or in hexadecimal")
    if dtype == "float32":
        check_float64_range(text, parsed)
        check_float32_range(parsed)
    return parsed


# Spellings that are zero or infinite as written (the others that parse as such are not).
_ZERO = r"^\s*[+-]?(0+\.?0*|\.0+)([eE][+-]?\d+)?\s*$"
_INFINITE = r"(?i)^\s*[+-]?inf(inity)?\s*$"


def check_float64_range(text: pa.Array, parsed: pa.Array) -> None:
    """Raises ArrowInvalid for a number Arrow's parser turned into zero or infinity without a
    word: its text is neither (`5e-330`, `2e308`: past a double's range)."""
    if len(parsed) == 0:
        return
    numbers = parsed.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        suspect = (numbers == 0) | np.isinf(numbers)
    if not suspect.any():
        return
    which = np.flatnonzero(suspect)
    texts = text.take(pa.array(which, pa.int64()))
    written = pc.or_(
        pc.match_substring_regex(texts, _ZERO), pc.match_substring_regex(texts, _INFINITE)
    )
    changed = np.flatnonzero(~pc.fill_null(written, True).to_numpy(zero_copy_only=False))
    if len(changed):
        first = texts[int(changed[0])].as_py().strip()
        became = numbers[which[changed[0]]]
        raise pa.ArrowInvalid(
            f"{first!r} is beyond a double's range: it would be {float(became)!r}"
        )


# What Arrow's int64 cast accepts but alters: leading zeros ('007', '-01') and hexadecimal.
_ALTERED_INTEGER = r"^\s*[+-]?0[0-9xX]"


# Values each number dtype takes (what `_convert` parses), to find bad rows without a loop.
_READABLE = {"int64": f"{_EXACT_INTEGER}|{BOOLEAN}", "float32": NUMBER}


def _unreadable(feature: FeatureSpec, value: str) -> str:
    """Why a value is not of its column's number type: worded as Arrow words a failed cast, so
    every bad number reads the same, or naming the zeros a code would lose."""
    prefix = f"column {feature.name!r} ({feature.dtype})"
    if feature.dtype == "int64" and re.match(_ALTERED_INTEGER, value):
        return (
            f"{prefix}: '{value}' has a leading zero or is hexadecimal, which int64 would "
            f"alter; to keep such codes as written, {schema_hint(feature.name, 'bytes')}"
        )
    parse_type = _PARSE_TYPES[feature.dtype]
    return f"{prefix}: Failed to parse string: '{value}' as a scalar of type {parse_type}"


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A column that did not convert whole: its bad rows, and its good rows converted."""

    bad: dict[int, str]  # row index -> reason
    values: pa.Array  # the converted values of the rows not in `bad`
    good: np.ndarray  # bool by row: not in `bad`


def _bad_rows(column: pa.Array, feature: FeatureSpec) -> _Failed:
    """The values of a column that failed to convert, found in one vectorized pass when the
    column's type has a pattern, value by value otherwise (or when a value that looks right
    still fails: an integer beyond int64, a float beyond float32)."""
    pattern = None if feature.logical_type else _READABLE.get(feature.dtype)
    if pattern is not None:
        text = column.view(pa.string())
        # A missing value (null) converts to a missing value: it is good.
        good = pc.fill_null(pc.match_substring_regex(text, pattern), True)
        good = good.to_numpy(zero_copy_only=False)
        try:
            values = _convert(column.filter(good), feature)
        except pa.ArrowInvalid:
            pass  # some values that look like numbers are out of range: look at each
        else:
            indices = np.flatnonzero(~good)
            found = column.take(pa.array(indices, pa.int64())).to_pylist()
            # A dirty column repeats its bad values ('unknown', '?'): one reason for each.
            reasons = {v: _unreadable(feature, v.decode("utf-8", "replace")) for v in set(found)}
            texts = {v for v in reasons if not _is_utf8(v)}
            if texts:  # say what reads them, not only that they are no numbers
                hint = not_utf8([v for v in found if v in texts])
                reasons.update((v, f"{reasons[v]}: {hint}") for v in texts)
            bad = {i: reasons[v] for i, v in zip(indices.tolist(), found, strict=True)}
            return _Failed(bad, values, good)
    if feature.dtype == "bytes" and not feature.logical_type:
        return _bad_text(column, feature)
    bad = {}
    undecodable: dict[int, bytes] = {}
    for index, value in enumerate(column.to_pylist()):
        if value is None:
            continue
        try:
            _convert(pa.array([value], pa.binary()), feature)
        except pa.ArrowInvalid as e:
            bad[index] = f"column {feature.name!r} ({feature.dtype}): {e}"
            if "Invalid UTF8" in str(e):
                undecodable[index] = value
    if undecodable:
        reason = (
            f"column {feature.name!r} ({feature.dtype}): {not_utf8(list(undecodable.values()))}"
        )
        bad.update(dict.fromkeys(undecodable, reason))
    good = np.ones(len(column), dtype=bool)
    good[list(bad)] = False
    return _Failed(bad, _convert(column.filter(good), feature), good)


def _rows_past_ascii(binary: pa.LargeBinaryArray) -> np.ndarray:
    """The rows whose value holds a byte of 0x80 or more, ascending (a null row holds no
    value, whatever bytes its slot still spans: a marker made null keeps them)."""
    _, offsets_buffer, data_buffer = binary.buffers()
    if data_buffer is None:
        return np.empty(0, np.int64)
    offsets = np.frombuffer(offsets_buffer, np.int64)[
        binary.offset : binary.offset + len(binary) + 1
    ]
    data = np.frombuffer(data_buffer, np.uint8)
    high = np.flatnonzero(data[offsets[0] : offsets[-1]] >= 0x80) + offsets[0]
    rows = np.unique(np.searchsorted(offsets, high, side="right") - 1)
    if binary.null_count:
        rows = rows[np.asarray(binary.is_valid().to_numpy(zero_copy_only=False))[rows]]
    return rows


def _bad_text(column: pa.Array, feature: FeatureSpec) -> _Failed:
    """A text column's values that are not UTF-8 (the one way its cast fails): only the values
    holding a byte past ASCII are decoded one by one (a Latin-1 name in 1% of rows costs no
    pass in Python over the other 99%)."""
    binary = column.cast(pa.large_binary())
    rows = _rows_past_ascii(binary).tolist()
    values = binary.take(pa.array(rows, pa.int64())).to_pylist()
    undecodable = {i: v for i, v in zip(rows, values, strict=True) if not _is_utf8(v)}
    reason = f"column {feature.name!r} ({feature.dtype}): " + (
        not_utf8(list(undecodable.values())) if undecodable else ""
    )
    good = np.ones(len(column), dtype=bool)
    good[list(undecodable)] = False
    return _Failed(dict.fromkeys(undecodable, reason), _convert(column.filter(good), feature), good)


def _part(failed: _Failed, keep: np.ndarray) -> pa.Array:
    """A failed column's converted values of the rows kept (all of them among its good rows)."""
    return failed.values.filter(keep[failed.good])


def typed_batch(
    batch: pa.RecordBatch,
    features: Sequence[FeatureSpec],
    found: Counter[tuple[str, str]],
    tokens: bool = False,
) -> tuple[pa.RecordBatch, dict[int, str]]:
    """Converts a batch of binary columns; returns the good rows and {bad row index: reason}.
    Cells that hold a missing-value marker of their column become null, counted in `found`
    by (column, marker); so do, with `tokens`, a number column's cells that are no number but
    a one-token missing value (`markers.TOKEN`: `.`, `-`, `nil`).

    The whole column is converted at once; only a column that fails is looked at again, to
    find the rows at fault, and its good rows are converted once.
    """
    bad: dict[int, str] = {}
    converted = _converted_together(batch, features)
    failed: dict[str, _Failed] = {}
    for feature in features:
        if feature.name in converted:
            continue
        typed = _typed_column(batch.column(feature.name), feature, found, tokens)
        if isinstance(typed, _Failed):
            failed[feature.name] = typed
            for index, reason in typed.bad.items():
                bad.setdefault(index, reason)
        else:
            converted[feature.name] = typed
    names = [f.name for f in features]
    if not bad:
        return pa.RecordBatch.from_arrays([converted[n] for n in names], names), bad
    keep = np.ones(batch.num_rows, dtype=bool)
    keep[list(bad)] = False
    # Every column is converted once: a failed column's good rows were, and keep a part of them.
    columns = [
        converted[n].filter(keep) if n in converted else _part(failed[n], keep) for n in names
    ]
    return pa.RecordBatch.from_arrays(columns, names), bad


def _typed_column(
    column: pa.Array, feature: FeatureSpec, found: Counter[tuple[str, str]], tokens: bool
) -> pa.Array | _Failed:
    """A column converted (its markers, and with `tokens` its one-token markers, null and
    counted in `found`), or its bad rows and its good rows converted."""
    markers = tuple(feature.null_values or ())
    first = bool(markers) and _markers_first(feature)
    if first:
        column, _ = _count_markers(column, feature, markers, found)
    try:
        return _convert(column, feature)
    except pa.ArrowInvalid:
        pass
    # A clean column never gets here: markers are looked for only when it fails.
    if markers and not first:
        column, count = _count_markers(column, feature, markers, found)
        if count:
            try:
                return _convert(column, feature)
            except pa.ArrowInvalid:
                pass
    failed = _bad_rows(column, feature)
    if tokens and failed.bad and feature.dtype != "bytes" and not feature.logical_type:
        # One-token markers first seen here are among the bad values (few: a dirty column's
        # bad values are looked at, not all of its values again).
        column, seen = _without_tokens_among(column, failed.bad)
        if _counted(found, feature.name, seen):
            failed = _bad_rows(column, feature)
    return failed if failed.bad else failed.values


def _without_tokens_among(column: pa.Array, bad: dict[int, str]) -> tuple[pa.Array, dict[str, int]]:
    """`column` with its cells at the `bad` rows that are one-token markers made null, and
    how many of each token."""
    rows = pa.array(sorted(bad), pa.int64())
    taken, seen = without_tokens(column.take(rows))
    if not seen:
        return column, {}
    mask = np.zeros(len(column), dtype=bool)
    mask[rows.to_numpy()[np.asarray(pc.is_null(taken).to_numpy(zero_copy_only=False))]] = True
    return pc.if_else(pa.array(mask), pa.scalar(None, column.type), column), seen


def _counted(found: Counter[tuple[str, str]], name: str, seen: dict[str, int]) -> int:
    """Adds `seen` (cells by marker) to `found` under column `name`; how many in all."""
    found.update({(name, marker): n for marker, n in seen.items()})
    return sum(seen.values())


def _converted_together(
    batch: pa.RecordBatch, features: Sequence[FeatureSpec]
) -> dict[str, pa.Array]:
    """The number columns of a batch converted in one pass per dtype: their texts end to end,
    cast and checked once, then sliced back (each column alone pays a few Arrow calls, which
    rows of thousands of columns pay thousands of times a batch). A dtype's columns that do
    not all convert (a bad value, a marker) are left out, for `typed_batch` to convert one
    by one and find the rows at fault."""
    converted: dict[str, pa.Array] = {}
    rows = batch.num_rows
    for dtype in ("float32", "int64"):
        group = [
            f for f in features
            if f.dtype == dtype and not f.logical_type and not _markers_first(f)
        ]  # fmt: skip
        if len(group) < 2 or not rows:
            continue
        try:
            together = pa.concat_arrays([batch.column(f.name) for f in group])
            parsed = _convert(together, group[0])
        except (pa.ArrowInvalid, pa.ArrowCapacityError):  # a bad value; texts past 2 GiB
            continue
        for i, feature in enumerate(group):
            converted[feature.name] = parsed.slice(i * rows, rows)
    return converted


def _markers_first(feature: FeatureSpec) -> bool:
    """Whether markers must be made null before converting: a text column converts them as
    text, and a marker that is a number of its column's type (`-999`) as that number."""
    markers = tuple(feature.null_values or ())
    return _markers_first_for(feature.dtype, bool(feature.logical_type), markers)


@functools.lru_cache(maxsize=4096)  # asked for every column of every batch
def _markers_first_for(dtype: str, logical: bool, markers: tuple[str, ...]) -> bool:
    if dtype == "bytes" or logical:
        return True
    return any(readable_as(m, dtype) for m in markers)


def _count_markers(
    column: pa.Array,
    feature: FeatureSpec,
    markers: tuple[str, ...],
    found: Counter[tuple[str, str]],
) -> tuple[pa.Array, int]:
    """`without_markers`, the cells made null counted in `found` by (column, cell). In a
    number column a marker that is a number is every spelling of that number (`-1` is also
    `-1.0` and `-1e0`), as pandas reads its `na_values`."""
    column, seen = without_markers(column, markers)
    count = _counted(found, feature.name, seen)
    numbers = _marker_numbers(feature.dtype, markers)
    if numbers:
        column, spelled = _without_numbers(column, numbers)
        count += _counted(found, feature.name, spelled)
    return column, count


@functools.lru_cache(maxsize=4096)
def _marker_numbers(dtype: str, markers: tuple[str, ...]) -> tuple[float, ...]:
    """The values of the markers that are numbers, for a number column (none for text)."""
    if dtype == "bytes":
        return ()
    return tuple(float(m) for m in markers if re.match(NUMBER, m) and float(m) == float(m))


def _without_numbers(
    column: pa.Array, numbers: tuple[float, ...]
) -> tuple[pa.Array, dict[str, int]]:
    """`column` (binary) with its cells that are a number of `numbers`, however written, made
    null; and how many of each spelling."""
    text = column.view(pa.string()) if pa.types.is_binary(column.type) else column
    numeric = pc.fill_null(pc.match_substring_regex(text, NUMBER), False)
    if not pc.any(numeric).as_py():
        return column, {}
    values = pc.cast(pc.utf8_trim_whitespace(pc.if_else(numeric, text, None)), pa.float64())
    found = pc.fill_null(pc.is_in(values, value_set=pa.array(numbers, pa.float64())), False)
    if not pc.any(found).as_py():
        return column, {}
    counts = value_counts(text.filter(found))
    return pc.if_else(found, pa.scalar(None, column.type), column), counts
