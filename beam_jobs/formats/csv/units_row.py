"""A units row under the header (`id,mm,kg,C` below `part,length,weight,temp`, as engineering
parts lists and lab exports ship): its text would make every number column text in a small
file, and be a dead letter besides number columns in a large one, whose sample is mostly
numbers. Either way not what the file means: the conversion is refused with the flags that
read the rows below it as numbers (`--skip_header_lines` past both lines, `--column_names`).

The rule: in the first file's sample, the first row holds no number and unit-like text (a
letter, `%` or `°`; not a missing-value marker: `?` is none) in at least two columns whose
other sampled values, at least three, are all numbers or markers. The flags are named only
when every input file was sampled and starts with that row, and the names can be given to
`--column_names` (none holds a comma or a quote); else the message asks for the row to be
removed (flags that skip a line of every file would lose a row of a file without it). A
`--schema` file decides the types itself: no check then.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.core.errors import DataError
from beam_jobs.formats.csv.markers import DEFAULT_MARKERS
from beam_jobs.formats.csv.numbers import NUMBER, reads_as
from beam_jobs.formats.csv.source import CsvSample, first_row

__all__ = ["refuse_units_row"]

_LEAST_COLUMNS = 2  # number columns whose first cell is text
_LEAST_VALUES = 3  # other values of each, all numbers


_UNIT_LIKE = re.compile(r"[^\W\d_]|[%°µ‰]")
_NOT_A_NAME = re.compile(r"[,\"]|^\s|\s$")  # what --column_names cannot say


def refuse_units_row(samples: Sequence[CsvSample], files: int) -> None:
    """Raises DataError for a units row under the header, by the module's rule (`files`:
    the input files listed)."""
    sample = samples[0]
    texts = sample.texts
    if not sample.dialect.has_header or texts.num_rows <= _LEAST_VALUES:
        return
    markers = set(DEFAULT_MARKERS) | set(sample.dialect.null_values or ())
    first = [texts.column(i)[0].as_py() for i in range(texts.num_columns)]
    present = [i for i, cell in enumerate(first) if cell is not None and cell.strip()]
    if any(reads_as(first[i], "float32") for i in present):
        return  # a row of data (`unknown,unknown,200,alice`): a units row holds no number
    worded = [i for i in present if first[i] not in markers and _UNIT_LIKE.search(first[i])]
    if len(worded) < _LEAST_COLUMNS:
        return  # the common case: a row of numbers, or of text columns
    rest = [texts.column(i).slice(1).combine_chunks() for i in worded]
    values = pa.concat_arrays([r.cast(pa.string()) for r in rest])
    labels = np.repeat(np.arange(len(rest)), [len(r) for r in rest])
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), bool)
    number = pc.fill_null(pc.match_substring_regex(values, NUMBER), False)
    marker = pc.fill_null(pc.is_in(values, value_set=pa.array(sorted(markers), pa.string())), False)
    fits = np.asarray(number.to_numpy(zero_copy_only=False), bool) | np.asarray(
        marker.to_numpy(zero_copy_only=False), bool
    )
    counts = np.bincount(labels, weights=valid, minlength=len(rest))
    misfits = np.bincount(labels, weights=valid & ~fits, minlength=len(rest))
    numeric = [worded[k] for k in range(len(rest)) if counts[k] >= _LEAST_VALUES and not misfits[k]]
    if len(numeric) < _LEAST_COLUMNS:
        return
    lines = sample.dialect.skip_header_lines
    shown = ", ".join(f"{sample.column_names[i]!r} ({first[i]})" for i in numeric[:5])
    found = (
        f"{sample.path}: line {lines + 2}, the first under the header, holds text in the number "
        f"columns {shown}: a units row?"
    )
    others = [s.path for s in samples[1:] if first_row(s.texts) != first_row(texts)]
    if others:
        raise DataError(
            f"{found} {others[0]} has no such row: remove the row from the files that have "
            "it, or convert them apart"
        )
    if len(samples) < files or any(_NOT_A_NAME.search(n) for n in sample.column_names):
        raise DataError(f"{found} Remove that row from the files to read them as numbers")
    names = shlex.quote(",".join(sample.column_names))
    raise DataError(
        f"{found} --skip_header_lines {lines + 2} --column_names {names} reads the rows below "
        "it as numbers"
    )
