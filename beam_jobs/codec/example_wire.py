"""`tf.train.Example` wire format for whole record batches, features in a fixed order.

tfx-bsl's encoder fills a protobuf map and serializes it in hash order, which differs from
process to process and from record to record; so the same rows gave other bytes on every run,
and compressed worse. This module writes the same messages with the features in the order given
(the manifest's), built column by column with numpy and Arrow's C++ string kernels: no per-row
Python.

The bytes of one Example (protobuf encoding; `varint` is base-128, little endian first):

    Example    = 0a varint(len(Features)) Features
    Features   = one Entry per feature: 0a varint(len(entry)) 0a varint(len(key)) key
                                        12 varint(len(Feature)) Feature
    Feature    = tag varint(len(List)) List,  tag 1a int64, 12 float, 0a bytes
    Int64List  = 0a varint(len(values)) varint(v)...   (packed; empty list: nothing)
    FloatList  = 0a varint(4 * n) float32-le...        (packed; empty list: nothing)
    BytesList  = (0a varint(len(v)) v)...

A feature with no values (a null) is present with an empty list, as tfx-bsl writes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["encode_examples", "varint_lengths", "varints"]

_MAX_VARINT = 10  # bytes of a 64-bit varint
_SHIFTS = np.arange(0, 7 * _MAX_VARINT, 7, dtype=np.uint64)
_LIMITS = np.left_shift(np.uint64(1), _SHIFTS[1:])  # a varint is longer than k bytes at 2**7k
_EMPTY = pa.scalar(b"", pa.large_binary())
_TAGS = {"int64": 0x1A, "float32": 0x12, "bytes": 0x0A}


def varint_lengths(values: np.ndarray) -> np.ndarray:
    """Bytes of each value's varint (values: uint64, or int64 taken as two's complement)."""
    u = values.astype(np.uint64, copy=False)
    lengths = np.ones(len(u), dtype=np.int64)
    if len(u):
        # One comparison per byte the largest value needs: lengths are mostly 1 or 2 bytes.
        for limit in _LIMITS[: int(np.searchsorted(_LIMITS, u.max(), side="right"))]:
            lengths += u >= limit
    return lengths


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Base-128 varints of uint64 (or two's-complement int64) values: a [n, w] byte matrix whose
    row i is valid up to its length (w the longest), and the lengths."""
    u = values.astype(np.uint64, copy=False)
    lengths = varint_lengths(u)
    width = int(lengths.max()) if len(lengths) else 0
    matrix = np.empty((len(u), width), dtype=np.uint8)
    for k in range(width):
        group = (u >> _SHIFTS[k]).astype(np.uint8) & np.uint8(0x7F)
        matrix[:, k] = group | ((lengths > k + 1).view(np.uint8) << np.uint8(7))
    return matrix, lengths


class _Rows:
    """Per-row byte strings built from column blocks: each block is a [n, w] byte matrix and
    how many of its leading bytes each row takes."""

    def __init__(self, n: int) -> None:
        self._n = n
        self._blocks: list[np.ndarray] = []
        self._takes: list[np.ndarray] = []

    def constant(self, data: bytes) -> _Rows:
        block = np.frombuffer(data, dtype=np.uint8)
        self._blocks.append(np.broadcast_to(block, (self._n, len(data))))
        self._takes.append(np.broadcast_to(np.arange(len(data)) >= 0, (self._n, len(data))))
        return self

    def varint(self, values: np.ndarray, present: np.ndarray | None = None) -> _Rows:
        """The varint of each row's value; only for rows where `present` is true, if given."""
        matrix, lengths = varints(values)
        if present is not None:
            lengths = np.where(present, lengths, 0)
        self._blocks.append(matrix)
        self._takes.append(np.arange(matrix.shape[1]) < lengths[:, None])
        return self

    def byte(self, value: int, present: np.ndarray) -> _Rows:
        self._blocks.append(np.full((self._n, 1), value, dtype=np.uint8))
        self._takes.append(present[:, None])
        return self

    def array(self) -> pa.LargeBinaryArray:
        """The rows as a binary array: the blocks side by side, each row's taken bytes in
        order (a boolean mask over a C-ordered matrix keeps row order)."""
        matrix = np.hstack(self._blocks)
        take = np.hstack(self._takes)
        return _binary(matrix[take], take.sum(axis=1))


def _binary(data: np.ndarray, lengths: np.ndarray) -> pa.LargeBinaryArray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _lengths(binary: pa.Array) -> np.ndarray:
    return pc.binary_length(binary).to_numpy(zero_copy_only=False).astype(np.int64)


def _row_sums(per_value: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    totals = np.zeros(len(per_value) + 1, dtype=np.int64)
    np.cumsum(per_value, out=totals[1:])
    return totals[offsets[1:]] - totals[offsets[:-1]]


def _payload(offsets: np.ndarray, values: pa.Array, dtype: str) -> tuple[pa.Array, np.ndarray]:
    """Each row's list content (without the packed header) and its byte length."""
    if dtype == "float32":
        data = np.asarray(values.to_numpy(zero_copy_only=False), dtype="<f4").view(np.uint8)
        lengths = 4 * np.diff(offsets)
        return _binary(data, lengths), lengths
    if dtype == "int64":
        ints = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
        matrix, sizes = varints(ints)
        data = matrix[np.arange(matrix.shape[1]) < sizes[:, None]]
        lengths = _row_sums(sizes, offsets)
        return _binary(data, lengths), lengths
    # bytes: each value as 0a varint(len) value, then each row's values joined.
    values = values.cast(pa.large_binary())
    sizes = _lengths(values)
    headers = _Rows(len(sizes)).constant(b"\x0a").varint(sizes).array()
    framed = pc.binary_join_element_wise(headers, values, _EMPTY)
    per_row = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), framed)
    lengths = _row_sums(_lengths(framed), offsets)
    return pc.binary_join(per_row, _EMPTY), lengths


def _entry(
    key: bytes, dtype: str, offsets: np.ndarray, values: pa.Array
) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """One feature's map entry for every row as its header and its list content, and the
    entry's byte length."""
    n = len(offsets) - 1
    payload, size = _payload(offsets, values, dtype)
    packed = (np.diff(offsets) > 0) if dtype != "bytes" else np.zeros(n, dtype=bool)
    list_len = np.where(packed, 1 + varint_lengths(size) + size, size)
    feature_len = 1 + varint_lengths(list_len) + list_len
    key_part = b"\x0a" + _varint_bytes(len(key)) + key + b"\x12"
    entry_len = len(key_part) + varint_lengths(feature_len) + feature_len
    header = (
        _Rows(n)
        .constant(b"\x0a")
        .varint(entry_len)
        .constant(key_part)
        .varint(feature_len)
        .constant(bytes([_TAGS[dtype]]))
        .varint(list_len)
        .byte(0x0A, packed)
        .varint(size, packed)
        .array()
    )
    return header, payload, 1 + varint_lengths(entry_len) + entry_len


def _varint_bytes(value: int) -> bytes:
    matrix, lengths = varints(np.array([value], dtype=np.uint64))
    return matrix[0, : lengths[0]].tobytes()


def encode_examples(
    names: Sequence[str],
    dtypes: Sequence[str],
    columns: Sequence[tuple[np.ndarray, pa.Array]],
    num_rows: int,
) -> pa.LargeBinaryArray:
    """Serialized Examples, one per row, with the features in the order of `names`.

    Args:
      names: the feature names.
      dtypes: each feature's dtype: "int64", "float32" or "bytes".
      columns: each feature's values as (row offsets from 0 into the values, the values: an
        int64, float32 or binary array with no nulls).
      num_rows: the number of Examples (what `columns` have, if any).
    """
    parts, total = [], np.zeros(num_rows, dtype=np.int64)
    for name, dtype, (offsets, values) in zip(names, dtypes, columns, strict=True):
        header, payload, size = _entry(name.encode(), dtype, offsets, values)
        parts += [header, payload]
        total += size
    header = _Rows(num_rows).constant(b"\x0a").varint(total).array()
    # One pass of Arrow's C++ kernel copies every row's pieces into place.
    return pc.binary_join_element_wise(header, *parts, _EMPTY)
