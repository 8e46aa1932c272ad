"""Assigning records to splits by a stable hash, vectorized.

A record's split depends only on its values as read (before a float32 feature rounds a number
read as float64): the `--split_key` feature's value, or every feature's value. pandas'
`hash_array` (SipHash with a fixed key, in C) hashes a column at once, so the same input and
options give the same assignment on any machine and any runner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.codec.examples import is_list
from beam_jobs.core.splits import Split

__all__ = [
    "SplitRule",
    "assign_splits",
    "float_texts",
    "row_hashes",
]

_MIX = np.uint64(0x9E3779B97F4A7C15)
_CHECKED = 32  # numbers of a batch whose fast text is compared with Python's


def _column_hashes(column: pa.Array) -> np.ndarray:
    from pandas.util import hash_array

    if is_list(column.type):
        # Lists hash by their text form; only whole-record hashing of list features gets here.
        values = np.array([repr(v) for v in column.to_pylist()], dtype=object)
    elif pa.types.is_integer(column.type):
        # Hashed as int64 whether or not the batch has nulls, which hash as one constant.
        hashes = hash_array(pc.fill_null(column.cast(pa.int64()), 0).to_numpy(), categorize=False)
        hashes[np.asarray(column.is_null())] = _MIX
        return hashes
    elif pa.types.is_floating(column.type):
        numbers = column.to_numpy(zero_copy_only=False)  # a null as NaN, as pandas has it
        if np.isnan(numbers).all():  # only nulls and NaNs: pandas hashes them as nulls
            values = np.asarray(column.to_pandas(), dtype=object)
        else:
            # pandas cannot hash float objects, so it hashes their str() ("nan" for a null).
            values = np.array(float_texts(numbers.astype(np.float64)), dtype=object)
    else:
        values = np.asarray(column.to_pandas(), dtype=object)
    return hash_array(values, categorize=False)


def float_texts(numbers: np.ndarray) -> list[bytes]:
    """`str()` of each float64 number, as Python writes it, in ASCII bytes (the text pandas
    hashes: it hashes a text's UTF-8 bytes, and bytes as they are, so giving it bytes skips
    an encoding pass).

    Python takes about 550 ns a number; orjson writes the same digits (both the shortest
    that read back exactly) in about 25 ns from the array, in the same form between 1e-4 and
    1e16 (checked on 6 million numbers of every magnitude), where most data lies. Numbers
    outside that range, and a sample of those inside, are written by Python; a sample that
    differs (another orjson) makes the whole batch Python's.
    """
    texts = _orjson_texts(numbers)
    if texts is None:
        return [repr(v).encode() for v in numbers.tolist()]
    magnitude = np.abs(numbers)
    with np.errstate(invalid="ignore"):
        usual = ((magnitude >= 1e-4) & (magnitude < 1e16)) | (numbers == 0)
    for i in np.flatnonzero(~usual).tolist():  # NaN and infinities too (orjson: null)
        texts[i] = repr(float(numbers[i])).encode()
    for i in np.flatnonzero(usual)[:: max(1, len(numbers) // _CHECKED)].tolist():
        if texts[i] != repr(float(numbers[i])).encode():
            return [repr(v).encode() for v in numbers.tolist()]
    return texts


def _orjson_texts(numbers: np.ndarray) -> list[bytes] | None:
    try:
        import orjson
    except ImportError:
        return None
    texts = orjson.dumps(numbers, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
    return texts if len(texts) == len(numbers) else None


def row_hashes(batch: pa.RecordBatch, columns: Sequence[str]) -> np.ndarray:
    """One uint64 per row from the values of `columns` (in that order)."""
    hashes = np.zeros(batch.num_rows, dtype=np.uint64)
    for name in columns:
        with np.errstate(over="ignore"):
            hashes = hashes * _MIX + _column_hashes(batch.column(name))
    return hashes


def assign_splits(
    batch: pa.RecordBatch, weights: Sequence[int], key: str | None = None
) -> np.ndarray:
    """The split index of every row: hash modulo the weights' sum, cut at their running sums."""
    columns = [key] if key else batch.schema.names
    buckets = row_hashes(batch, columns) % np.uint64(sum(weights))
    return np.searchsorted(np.cumsum(weights), buckets, side="right")


@dataclasses.dataclass(frozen=True)
class SplitRule:
    """Which split each record goes to: the `--splits` and the `--split_key`."""

    splits: tuple[Split, ...]
    key: str | None = None

    def which(self, batch: pa.RecordBatch) -> np.ndarray:
        """Each row's split, as its index in `splits` (one hash per row)."""
        return assign_splits(batch, [s.weight for s in self.splits], self.key)
