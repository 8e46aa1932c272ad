"""Parsing a chunk of JSON lines into rows of the feature spec, exactly, with bad lines named.

pyarrow's C++ JSON reader parses the whole chunk at once. A chunk is taken as parsed only when
nothing in it could have been altered on the way: no object nested deeper than `MAX_DEPTH`, no
dotted key colliding with a nested one (`"a.b"` beside `{"a": {"b": ...}}`), and no `int64`
feature read as floating point (pyarrow reads a column that mixes integers and other numbers as
doubles, which would round integers from 2**53 up). Otherwise the chunk's lines are first
checked by Python's `json` module (not JSON, not UTF-8, not an object, a duplicate key, a
number out of range, nesting too deep: each a dead letter with its reason), and the rest are
parsed by halves until every part parses cleanly; a single line that still does not is a dead
letter with pyarrow's reason. A few bad lines cost a few extra parses of shrinking parts.

After parsing: an object where the spec has a value (`{"a": {"x": 1}}` for a scalar `a`) is a
dead letter, and keys the spec does not have are counted, never dropped silently.
"""

from __future__ import annotations

import collections
import io
import json
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from beam_jobs.formats.base import OnBadRow
from beam_jobs.formats.lines.chunks import line_offsets
from beam_jobs.schema import conform as arrow_conform
from beam_jobs.sink.dead_letter import BadRow, as_text
from tfdata_reader.manifest import FeatureSpec

__all__ = ["MAX_DEPTH", "line_problem", "parse_chunk", "read_chunk"]

MAX_DEPTH = 64


class Line(NamedTuple):
    start: int  # offset in the file
    end: int
    text: bytes


class _Rejected(ValueError):
    """A part of a chunk that does not parse cleanly as a whole."""


def _lines(chunk: bytes, offset: int) -> list[Line]:
    """Each non-blank line, which is each row pyarrow makes."""
    starts, ends = line_offsets(chunk)
    found = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        text = chunk[start:end]
        if text.strip():
            found.append(Line(offset + start, offset + end, text))
    return found


def _bad(path: str, line: Line, reason: str) -> BadRow:
    raw = {"raw": as_text(line.text.rstrip(b"\r"))}
    return BadRow(path, line.start, line.end, reason, None, raw, offset=line.start)


def _depth(arrow_type: pa.DataType) -> int:
    if pa.types.is_struct(arrow_type):
        return 1 + max((_depth(f.type) for f in arrow_type), default=0)
    if arrow_conform.is_list(arrow_type):
        return 1 + _depth(arrow_type.value_type)
    return 0


def _parse(data: bytes, int64_names: frozenset[str], single_line: bool) -> pa.Table:
    """The flattened table of `data`, or `_Rejected` saying why it cannot be trusted whole."""
    options = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1))
    try:
        table = pj.read_json(io.BytesIO(data), read_options=options)
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        raise _Rejected(str(e)) from None
    depth = max((_depth(f.type) for f in table.schema), default=0)
    if depth >= MAX_DEPTH:
        raise _Rejected(f"nested {depth} levels deep, more than {MAX_DEPTH}")
    flat = arrow_conform.flatten_structs(table)
    names = flat.column_names
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise _Rejected(f"the key {twice[0]!r} is given twice, once as a nested object's key")
    if not single_line:
        for name in int64_names & set(names):
            value_type = flat.schema.field(name).type
            if arrow_conform.is_list(value_type):
                value_type = value_type.value_type
            if pa.types.is_floating(value_type):
                raise _Rejected(f"{name!r} mixes integers and other numbers")
    return flat


def parse_chunk(data: bytes) -> pa.Table:
    """A chunk of lines as one flattened table; ValueError when it does not parse cleanly."""
    return _parse(data, frozenset(), single_line=False)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen.add(key)
    return dict(pairs)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _nesting(value: Any, depth: int = 0) -> int:
    if isinstance(value, dict):
        return max((_nesting(v, depth + 1) for v in value.values()), default=depth + 1)
    if isinstance(value, list):
        return max((_nesting(v, depth + 1) for v in value), default=depth + 1)
    return depth


def line_problem(text: bytes) -> str | None:
    """Why one line cannot be a record, as Python's json module sees it (None: it can)."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"invalid UTF-8: {e}"
    try:
        value = json.loads(
            decoded,
            object_pairs_hook=_no_duplicate_keys,
            parse_float=_finite,
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        return f"nested more deeply than the {MAX_DEPTH} levels a record may have"
    except ValueError as e:
        return f"invalid JSON: {e}"
    if not isinstance(value, dict):
        return f"not a JSON object: a JSON {type(value).__name__}"
    depth = _nesting(value)
    if depth >= MAX_DEPTH:
        return f"nested {depth} levels deep, more than {MAX_DEPTH}"
    return None


def _parts(
    lines: list[Line], int64_names: frozenset[str], path: str, on_bad_row: OnBadRow
) -> list[tuple[pa.Table, list[Line]]]:
    """The lines as tables that parse cleanly, halving a part that does not."""
    try:
        data = b"\n".join(line.text for line in lines)
        return [(_parse(data, int64_names, len(lines) == 1), lines)]
    except _Rejected as e:
        if len(lines) == 1:
            on_bad_row(_bad(path, lines[0], f"cannot read as JSON: {e}"))
            return []
    middle = len(lines) // 2
    return _parts(lines[:middle], int64_names, path, on_bad_row) + _parts(
        lines[middle:], int64_names, path, on_bad_row
    )


def _object_rows(table: pa.Table, features: Sequence[FeatureSpec]) -> dict[int, str]:
    """Rows holding an object where the spec has a value (flattened away into `name.*`)."""
    bad: dict[int, str] = {}
    names = set(table.column_names)
    for feature in features:
        if feature.name in names:
            continue
        nested = [n for n in names if n.startswith(feature.name + ".")]
        if not nested:
            continue
        present = np.zeros(table.num_rows, dtype=bool)
        for name in nested:
            present |= np.asarray(pc.is_valid(table.column(name)))
        reason = f"feature {feature.name!r}: an object where a value is expected"
        bad.update(dict.fromkeys(np.flatnonzero(present).tolist(), reason))
    return bad


def _count_ignored(
    table: pa.Table, features: Sequence[FeatureSpec], ignored: collections.Counter
) -> None:
    known = {f.name for f in features}
    for name in table.column_names:
        if name in known or any(name.startswith(k + ".") for k in known):
            continue
        values = int(pc.sum(pc.is_valid(table.column(name))).as_py() or 0)
        if values:
            ignored[name] += values


def _conform(
    table: pa.Table,
    lines: list[Line] | None,
    chunk: bytes,
    offset: int,
    features: Sequence[FeatureSpec],
    path: str,
    on_bad_row: OnBadRow,
    ignored: collections.Counter,
) -> pa.RecordBatch:
    """The table's good rows conformed to the spec; `lines` is worked out only when needed."""
    _count_ignored(table, features, ignored)
    bad = _object_rows(table, features)
    if bad:
        table = table.filter(pa.array([i not in bad for i in range(table.num_rows)]))
    batch, typed = arrow_conform.conform(table, features)
    if bad or typed:
        lines = lines if lines is not None else _lines(chunk, offset)
        kept = [i for i in range(len(lines)) if i not in bad]
        problems = {**bad, **{kept[i]: reason for i, reason in typed.items()}}
        for index, reason in sorted(problems.items()):
            on_bad_row(_bad(path, lines[index], reason))
    return batch


def read_chunk(
    chunk: bytes,
    offset: int,
    path: str,
    features: Sequence[FeatureSpec],
    on_bad_row: OnBadRow,
    ignored: collections.Counter | None = None,
) -> pa.RecordBatch | None:
    """The good rows of a chunk of whole lines, conformed to `features` (None: no rows).

    Args:
      chunk: whole lines of a JSON lines file.
      offset: where the chunk starts in the file.
      path: the file, for dead letters.
      features: the spec.
      on_bad_row: called once per line that is not converted.
      ignored: counts, per key the spec lacks, the values left out.
    """
    ignored = ignored if ignored is not None else collections.Counter()
    int64_names = frozenset(f.name for f in features if f.dtype == "int64")
    try:
        table = _parse(chunk, int64_names, single_line=False)
    except _Rejected:
        table = None
    if table is not None:
        if not table.num_rows:
            return None
        return _conform(table, None, chunk, offset, features, path, on_bad_row, ignored)
    # The slow path, for a chunk that did not parse cleanly: Python's json module names the
    # lines that are not records at all; halving isolates the ones pyarrow alone rejects.
    good = []
    for line in _lines(chunk, offset):
        problem = line_problem(line.text)
        if problem is None:
            good.append(line)
        else:
            on_bad_row(_bad(path, line, problem))
    batches = [
        _conform(table, part, chunk, offset, features, path, on_bad_row, ignored)
        for table, part in (_parts(good, int64_names, path, on_bad_row) if good else [])
    ]
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return None
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
