"""Parsing a chunk of JSON lines into rows of the feature spec, exactly, with bad lines named.

pyarrow's C++ JSON reader parses the whole chunk at once. A chunk is taken as parsed only when
nothing in it could have been altered on the way: it is UTF-8, no line nests `MAX_DEPTH` levels
or more (measured on the bytes first: pyarrow crashes on very deep lines), pyarrow made exactly
one row per non-blank line (two objects on one line would shift every row after them), no
dotted key collides with a nested one (`"a.b"` beside `{"a": {"b": ...}}`), and no `int64`
feature was read as floating point (pyarrow reads a column that mixes integers and other
numbers as doubles, which would round integers from 2**53 up). Otherwise the chunk's lines are
first checked by Python's `json` module (not JSON, two values on a line, not UTF-8, not an
object, a duplicate key, a number out of range, nesting too deep: each a dead letter with its
reason), and the rest are parsed in parts: split at the row pyarrow names in its error (a line
whose value changes type), else by halves, until every part parses cleanly; a single line that
still does not is a dead letter with pyarrow's reason.

After parsing: an object (even `{}`) or a dotted key where the spec has a value is a dead
letter, and keys the spec does not have are counted, never dropped silently.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from beam_jobs.codec.examples import is_list
from beam_jobs.core.bad_rows import BadRow, as_text
from beam_jobs.formats.base import OnBadRow
from beam_jobs.formats.jsonl.depth import deep_lines, nesting_depth
from beam_jobs.formats.lines.chunks import line_offsets
from beam_jobs.schema.conform import conform, flatten_structs, one_layout
from beam_jobs.schema.precision import Float32Changes
from beam_jobs.schema.rows import flatten_object
from tfdata_reader.manifest import FeatureSpec

__all__ = ["MAX_DEPTH", "line_problem", "parse_chunk", "read_chunk"]

MAX_DEPTH = 64
_MIN_RUN = 64  # lines: the least `_parts` tries at once after a bad line
_PARSER_DEPTH = 512  # far below where pyarrow's recursive parser overflows a thread's stack


class _Line(NamedTuple):
    start: int  # offset in the file
    end: int
    text: bytes


class _Rejected(ValueError):
    """A part of a chunk that does not parse cleanly as a whole."""

    def __init__(self, reason: str, row: int | None = None) -> None:
        super().__init__(reason)
        self.row = row  # the row pyarrow stopped at, when it says


_JSON_BLANK = b" \t\r"  # JSON's whitespace on a line; Python's bytes.strip() takes more
_ERROR_ROW = re.compile(r"in row (\d+)$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _ChunkLines:
    """The non-blank lines of a chunk (each one a row pyarrow makes), as offsets."""

    def __init__(self, chunk: bytes, offset: int) -> None:
        self.chunk, self.offset = chunk, offset
        starts, ends = line_offsets(chunk)
        if len(starts):
            data = np.frombuffer(chunk, dtype=np.uint8)
            first = data[np.minimum(starts, len(data) - 1)]
            # Only an empty line or one that starts blank can be blank: few are looked at.
            maybe = np.flatnonzero((ends == starts) | (first == 32) | (first == 9) | (first == 13))
            blank = [i for i in maybe.tolist() if not chunk[starts[i] : ends[i]].strip(_JSON_BLANK)]
            starts, ends = np.delete(starts, blank), np.delete(ends, blank)
        self.starts, self.ends = starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def text(self, i: int) -> bytes:
        return self.chunk[self.starts[i] : self.ends[i]]

    def line(self, i: int) -> _Line:
        return _Line(
            self.offset + int(self.starts[i]), self.offset + int(self.ends[i]), self.text(i)
        )

    def data(self, rows: np.ndarray) -> bytes:
        """Lines `rows` (in order) as one input to parse: a slice of the chunk when no
        non-blank line between the first and the last is left out."""
        first, last = int(rows[0]), int(rows[-1])
        if last - first + 1 == len(rows):
            return self.chunk[self.starts[first] : self.ends[last]]
        return b"\n".join(self.text(i) for i in rows.tolist())


def _bad(path: str, line: _Line, reason: str) -> BadRow:
    raw = {"raw": as_text(line.text.rstrip(b"\r"))}
    return BadRow(path, line.start, line.end, reason, None, raw, offset=line.start)


class _ParseSpec(NamedTuple):
    """What parsing needs of the feature spec."""

    int64_names: frozenset[str] = frozenset()  # features whose integers must stay exact
    # Text features, read as text: pyarrow would make ISO dates timestamps and lose the text.
    text_schema: pa.Schema | None = None

    @classmethod
    def of(cls, features: Sequence[FeatureSpec]) -> _ParseSpec:
        text = [
            pa.field(f.name, pa.string() if f.shape == [] else pa.list_(pa.string()))
            for f in features
            if f.dtype == "bytes" and "." not in f.name
        ]
        int64 = frozenset(f.name for f in features if f.dtype == "int64")
        return cls(int64, pa.schema(text) if text else None)


def _read_json(data: bytes, spec: _ParseSpec) -> pa.Table:
    # One block for the whole part: a smaller block could not hold a long line.
    options = pj.ReadOptions(use_threads=False, block_size=max(1 << 16, len(data) + 1))
    parse = None
    if spec.text_schema is not None:
        parse = pj.ParseOptions(explicit_schema=spec.text_schema, unexpected_field_behavior="infer")
    try:
        return pj.read_json(io.BytesIO(data), read_options=options, parse_options=parse)
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        found = _ERROR_ROW.search(str(e))
        raise _Rejected(str(e), int(found.group(1)) if found else None) from None


def _parse(data: bytes, rows: int, spec: _ParseSpec) -> tuple[pa.Table, pa.Table]:
    """The table of `data` (which holds `rows` non-blank lines), as parsed and flattened, or
    `_Rejected` saying why it cannot be trusted whole."""
    table = _read_json(data, spec)
    if table.num_rows != rows:
        raise _Rejected(f"{table.num_rows} objects in {rows} lines")
    depth = max((_type_depth(f.type) for f in table.schema), default=0) + 1
    if depth >= MAX_DEPTH:
        raise _Rejected(f"nested {depth} levels deep, more than {MAX_DEPTH}")
    flat = flatten_structs(table)
    names = flat.column_names
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise _Rejected(f"the key {twice[0]!r} is given twice, once as a nested object's key")
    for name in spec.int64_names & set(names):
        value_type = flat.schema.field(name).type
        if is_list(value_type):
            value_type = value_type.value_type
        if pa.types.is_floating(value_type):
            if rows > 1:
                raise _Rejected(f"{name!r} mixes integers and other numbers")
            _refuse_rounded_integers(data, name)
    return table, flat


def _refuse_rounded_integers(line: bytes, name: str) -> None:
    """pyarrow read feature `name` of one line as doubles: that is exact unless the line holds
    an integer a double cannot (beyond 2**53, beside a number with a fraction, or beyond
    int64), which `_Rejected` names."""
    value = flatten_object(json.loads(line)).get(name)
    for number in value if isinstance(value, list) else [value]:
        if isinstance(number, int) and not isinstance(number, bool):
            if not _INT64_MIN <= number <= _INT64_MAX:
                raise _Rejected(f"feature {name!r}: the integer {number} is beyond the int64 range")
            if abs(number) > 2**53:
                raise _Rejected(
                    f"feature {name!r}: the integer {number} is beside numbers with a fraction "
                    "or exponent, so it cannot be read exactly"
                )


def _type_depth(arrow_type: pa.DataType) -> int:
    """How deeply a parsed column nests (iterative: it may be deep)."""
    deepest, pending = 0, [(arrow_type, 0)]
    while pending:
        value_type, depth = pending.pop()
        deepest = max(deepest, depth)
        if pa.types.is_struct(value_type):
            pending += [(field.type, depth + 1) for field in value_type]
        elif is_list(value_type):
            pending.append((value_type.value_type, depth + 1))
    return deepest


def _trusted_whole(lines: _ChunkLines) -> bool:
    """Whether pyarrow may parse the chunk at once: it is UTF-8 (pyarrow does not check) and
    no line is deep enough to exhaust pyarrow's stack (the depth limit itself is checked on
    the parsed types, which cost nothing to look at)."""
    try:
        lines.chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if b"null" in lines.chunk and _NULL_LINE.search(lines.chunk):
        return False  # pyarrow reads a line `null` as a record of missing values
    if _EXTREME_NUMBER.search(lines.chunk):
        return False
    return not deep_lines(lines.chunk, _PARSER_DEPTH, (lines.starts, lines.ends))


_NULL_LINE = re.compile(rb"(?m)^[ \t]*null[ \t\r]*$")


def _parse_whole(lines: _ChunkLines, spec: _ParseSpec) -> tuple[pa.Table, pa.Table]:
    if not _trusted_whole(lines):
        raise _Rejected("not UTF-8, or nested too deeply")
    return _parse(lines.chunk, len(lines), spec)


def parse_chunk(data: bytes) -> pa.Table:
    """A chunk of lines as one flattened table; ValueError when it does not parse cleanly."""
    return _parse_whole(_ChunkLines(data, 0), _ParseSpec())[1]


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen.add(key)
    return dict(pairs)


class _OutOfRange(ValueError):
    """A JSON number a double cannot hold."""


def _finite(text: str) -> float:
    """A JSON number as a double, refused when a double cannot hold it: past 1.8e308 it would
    be infinite, below 4.9e-324 zero (`5e-330`)."""
    value = float(text)
    mantissa = text.partition("e")[0].partition("E")[0]
    if math.isinf(value) or (value == 0 and _NONZERO_DIGIT.search(mantissa)):
        raise _OutOfRange(f"the number {text} is beyond a double's range: it would be {value}")
    return value


_NONZERO_DIGIT = re.compile(r"[1-9]")
# Numbers whose exponent reaches 300, or with 300 zeros after the point: they may pass a
# double's range, which pyarrow's parser would turn into 0 or infinity without a word, so the
# chunk's lines are checked by `line_problem` first.
_EXTREME_NUMBER = re.compile(rb"[eE][+-]?0*(?:[3-9]\d{2}|[1-9]\d{3})|\.0{300}")


# What a line that is not an object holds, in JSON's words.
_JSON_KINDS = {
    type(None): "null",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
}


def line_problem(text: bytes) -> str | None:
    """Why one line cannot be a record, as Python's json module sees it (None: it can)."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"invalid UTF-8: {e}"
    depth = nesting_depth(text) if text.count(b"{") + text.count(b"[") >= MAX_DEPTH else 1
    if depth >= MAX_DEPTH:
        return f"nested {depth} levels deep, more than {MAX_DEPTH}"
    try:
        value = json.loads(
            decoded,
            object_pairs_hook=_no_duplicate_keys,
            parse_float=_finite,
        )
    except RecursionError:
        return f"nested more deeply than the {MAX_DEPTH} levels a record may have"
    except _OutOfRange as e:
        return str(e)
    except ValueError as e:
        return f"invalid JSON: {e}"
    if not isinstance(value, dict):
        return f"not a JSON object: {_JSON_KINDS.get(type(value), 'a JSON value')}"
    return None


class _Part(NamedTuple):
    table: pa.Table  # as parsed
    flat: pa.Table  # nested objects flattened into dotted names
    rows: np.ndarray | None  # the chunk's lines it holds (None: all of them)


class _Splitter:
    """Parses runs of a chunk's lines, splitting a run that does not parse cleanly where pyarrow
    says the trouble is (a line whose value differs in type from the lines before it: the lines
    before it, that line, and the rest), else in halves. After a split, the rest is tried in
    runs about twice the distance to the last bad line, doubling while they parse; the lines
    split off alone are set aside and parsed together at the end. So mistyped lines cost a
    couple of small parses each, not a parse of the rest of the chunk each."""

    def __init__(
        self, lines: _ChunkLines, spec: _ParseSpec, on_bad_line: Callable[..., Any]
    ) -> None:
        self._lines, self._spec, self._on_bad_line = lines, spec, on_bad_line

    def parts(self, rows: np.ndarray) -> list[_Part]:
        aside: list[int] = []
        parts = self._parts(rows, aside)
        if aside:
            parts += self._parts(np.array(aside), None)
        return parts

    def _parts(self, rows: np.ndarray, aside: list[int] | None) -> list[_Part]:
        parts: list[_Part] = []
        lo, hi = 0, len(rows)
        window = hi
        while lo < hi:
            top = min(hi, lo + window)
            run = rows[lo:top]
            try:
                table, flat = _parse(self._lines.data(run), len(run), self._spec)
                parts.append(_Part(table, flat, run))
                lo, window = top, 2 * window
                continue
            except _Rejected as e:
                if len(run) == 1:
                    self._on_bad_line(int(run[0]), str(e))
                    lo += 1
                    continue
                row = e.row if e.row is not None and e.row < len(run) else None
            if row is None:
                middle = (lo + top) // 2
                parts += self._parts(rows[lo:middle], aside)
                lo, window = middle, top - middle
                continue
            if row:
                parts += self._parts(rows[lo : lo + row], aside)
            if aside is None:
                parts += self._parts(rows[lo + row : lo + row + 1], None)
            else:
                aside.append(int(rows[lo + row]))
            lo, window = lo + row + 1, max(_MIN_RUN, 2 * row)
        return parts


def _merged(parts: list[_Part]) -> list[_Part]:
    """Parts whose columns have the same types, as one part each: one conversion per layout,
    not one per part."""
    groups: dict[str, list[_Part]] = {}
    for part in parts:
        groups.setdefault(part.table.schema.to_string(), []).append(part)
    merged = []
    for group in groups.values():
        if len(group) == 1:
            merged.append(group[0])
            continue
        merged.append(
            _Part(
                pa.concat_tables([part.table for part in group]),
                pa.concat_tables([part.flat for part in group]),
                np.concatenate([part.rows for part in group]),
            )
        )
    return merged


def _struct_paths(table: pa.Table) -> dict[str, pa.Array]:
    """Every object-valued column of a parsed table by dotted name, with its parents' nulls."""
    found: dict[str, pa.Array] = {}
    # Only objects are looked at: combining some other columns pyarrow's JSON reader made
    # (a list of null and 1 in one chunk) fails in pyarrow itself.
    pending = [
        (field.name, table.column(i).combine_chunks())
        for i, field in enumerate(table.schema)
        if pa.types.is_struct(field.type)
    ]
    while pending:
        name, column = pending.pop()
        if pa.types.is_struct(column.type):
            found[name] = column
            children = column.flatten()  # applies the parent's nulls
            pending += [(f"{name}.{f.name}", c) for f, c in zip(column.type, children, strict=True)]
    return found


def _object_rows(part: _Part, features: Sequence[FeatureSpec]) -> dict[int, str]:
    """Rows holding an object (even an empty one), or a dotted key, where the spec has a value:
    both are flattened away into `name.*` columns the spec does not have."""
    bad: dict[int, str] = {}
    objects = _struct_paths(part.table)
    flat_names = part.flat.column_names
    feature_names = {f.name for f in features}
    for feature in features:
        if feature.name in objects:
            rows = np.flatnonzero(np.asarray(objects[feature.name].is_valid())).tolist()
            reason = f"feature {feature.name!r}: an object where a value is expected"
            bad.update(dict.fromkeys(rows, reason))
        prefix = feature.name + "."
        for name in flat_names:
            if name.startswith(prefix) and name not in feature_names:
                rows = np.flatnonzero(np.asarray(pc.is_valid(part.flat.column(name)))).tolist()
                reason = f"feature {feature.name!r}: a value under {name!r}, a key inside it"
                for row in rows:
                    bad.setdefault(row, reason)
        # The reverse: a value where the spec has an object's keys (`"user": 7` for user.id).
        steps = feature.name.split(".")
        for parent in (".".join(steps[:k]) for k in range(1, len(steps))):
            if parent in flat_names and parent not in feature_names and parent not in objects:
                rows = np.flatnonzero(np.asarray(pc.is_valid(part.flat.column(parent)))).tolist()
                reason = f"feature {feature.name!r}: a value where {parent!r} is an object"
                for row in rows:
                    bad.setdefault(row, reason)
    return bad


def _count_ignored(
    table: pa.Table, features: Sequence[FeatureSpec], ignored: collections.Counter[str]
) -> None:
    known = {f.name for f in features}
    for name in table.column_names:
        if name in known or any(name.startswith(k + ".") for k in known):
            continue  # a feature, or a dead letter for `_object_rows`
        values = int(pc.sum(pc.is_valid(table.column(name))).as_py() or 0)
        if values:
            ignored[name] += values


def _conform(
    part: _Part,
    lines: _ChunkLines,
    features: Sequence[FeatureSpec],
    path: str,
    on_bad_row: OnBadRow,
    ignored: collections.Counter[str],
    changes: Float32Changes | None = None,
) -> tuple[pa.RecordBatch, np.ndarray]:
    """The part's good rows conformed to the spec, and the chunk's lines they are."""
    rows = part.rows if part.rows is not None else np.arange(len(lines))
    table = part.flat
    bad = _object_rows(part, features)
    if bad:
        table = table.filter(pa.array([i not in bad for i in range(table.num_rows)]))
    _count_ignored(table, features, ignored)
    try:
        batch, typed = conform(table, features, changes)
    except pa.ArrowIndexError as e:
        # pyarrow cannot combine a column its JSON reader made of clashing values (a list of
        # null and 1 in a number column): the part's rows are dead letters, not a crash.
        batch = conform(pa.table({}), features)[0]  # no rows, the spec's types
        reason = f"pyarrow could not read the values of this line as the spec's types ({e})"
        typed = dict.fromkeys(range(table.num_rows), reason)
    problems: dict[int, str] = {}
    if bad or typed:
        kept = [i for i in range(len(rows)) if i not in bad]
        problems = {**bad, **{kept[i]: reason for i, reason in typed.items()}}
        for index, reason in sorted(problems.items()):
            on_bad_row(_bad(path, lines.line(int(rows[index])), reason))
    good = np.delete(rows, sorted(problems)) if problems else rows
    return batch, good


def _slow_parts(
    lines: _ChunkLines, spec: _ParseSpec, path: str, on_bad_row: OnBadRow
) -> list[_Part]:
    """The chunk in parts that parse cleanly, for a chunk that does not as a whole; a line
    pyarrow cannot be given (not UTF-8, too deep) or rejects alone is a dead letter, with
    the reason Python's json module gives when it has one."""

    def on_bad_line(i: int, reason: str) -> None:
        line = lines.line(i)
        problem = line_problem(line.text)
        on_bad_row(_bad(path, line, problem or f"cannot read as JSON: {reason}"))

    unsafe = [i for i in range(len(lines)) if not _parser_safe(lines.text(i))]
    for i in unsafe:
        on_bad_line(i, "")
    rows = np.delete(np.arange(len(lines)), unsafe)
    if not len(rows):
        return []
    return _Splitter(lines, spec, on_bad_line).parts(rows)


def _parser_safe(line: bytes) -> bool:
    """Whether pyarrow may be given the line (see `_trusted_whole`)."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if line.strip(b" \t\r") == b"null":
        return False  # pyarrow would read it as a record of missing values
    if _EXTREME_NUMBER.search(line) and line_problem(line) is not None:
        return False  # a number past a double's range, which pyarrow would alter
    return len(line) < 2 * _PARSER_DEPTH or nesting_depth(line) < _PARSER_DEPTH


def read_chunk(
    chunk: bytes,
    offset: int,
    path: str,
    features: Sequence[FeatureSpec],
    on_bad_row: OnBadRow,
    ignored: collections.Counter[str] | None = None,
    changes: Float32Changes | None = None,
) -> list[pa.RecordBatch]:
    """The good rows of a chunk of whole lines, conformed to `features`.

    A chunk that parses cleanly is one batch in file order. Otherwise its parts are converted
    a batch per column layout (parts may differ in it: one value per row, or a list), and put
    back in file order as one batch.

    Args:
      chunk: whole lines of a JSON lines file.
      offset: where the chunk starts in the file.
      path: the file, for dead letters.
      features: the spec.
      on_bad_row: called once per line that is not converted.
      ignored: counts, per key the spec lacks, the values left out.
      changes: counts, per float32 feature, what float32 changes of the values.
    """
    ignored = ignored if ignored is not None else collections.Counter()
    found: list[BadRow] = []  # told in the lines' order, however the parts came out
    try:
        return _read_chunk(chunk, offset, path, features, found.append, ignored, changes)
    finally:
        for bad in sorted(found, key=lambda row: row.offset or 0):
            on_bad_row(bad)


def _read_chunk(
    chunk: bytes,
    offset: int,
    path: str,
    features: Sequence[FeatureSpec],
    on_bad_row: OnBadRow,
    ignored: collections.Counter[str],
    changes: Float32Changes | None,
) -> list[pa.RecordBatch]:
    spec = _ParseSpec.of(features)
    lines = _ChunkLines(chunk, offset)
    parts: list[_Part] | None = None
    with contextlib.suppress(_Rejected):
        parts = [_Part(*_parse_whole(lines, spec), None)]
    if parts is None:
        parts = _merged(_slow_parts(lines, spec, path, on_bad_row))
    converted = [
        _conform(part, lines, features, path, on_bad_row, ignored, changes)
        for part in parts
        if part.table.num_rows
    ]
    converted = [(batch, rows) for batch, rows in converted if batch.num_rows]
    if not converted:
        return []
    # Parts came out by layout and in the order they parsed (a line pyarrow rejected after a
    # bad one is parsed after the rest, even in a single part): the lines' order, restored.
    lines_of = np.concatenate([rows for _, rows in converted])
    if len(converted) == 1 and bool((np.diff(lines_of) > 0).all()):
        return [converted[0][0]]
    order = np.argsort(lines_of, kind="stable")
    table = pa.Table.from_batches(one_layout([batch for batch, _ in converted]))
    return table.take(pa.array(order)).combine_chunks().to_batches()
