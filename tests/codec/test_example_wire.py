"""Our `tf.train.Example` wire encoder against two independent oracles, over generated batches:
protobuf's own serializer (entry by entry, in our fixed feature order) for the exact bytes, and
TensorFlow's C++ parser (`tf.io.parse_example`) for the values read back."""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_jobs.codec.example_wire import varint_lengths, varints
from beam_jobs.codec.examples import ExampleEncoder, cast_together
from tfdata_reader.manifest import FeatureSpec

_ARROW = {"int64": pa.int64(), "float32": pa.float32(), "bytes": pa.binary()}
_TF = {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}
_VALUES = {
    "int64": st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.sampled_from([0, 1, -1, 127, 128, 2**63 - 1, -(2**63), 2**35, -(2**35)]),
    ),
    "float32": st.floats(width=32, allow_nan=True, allow_infinity=True),
    "bytes": st.one_of(
        st.binary(max_size=40),
        st.text(max_size=20).map(str.encode),  # non-ASCII text as UTF-8
        st.sampled_from([b"", b"\x00", b"a\x00b", b"\xff\xfe"]),
    ),
}


@st.composite
def _columns(draw, min_names=1, max_names=5, lists=True):
    """A feature spec (names, dtypes, scalar or list) and rows of values, None for a null."""
    names = draw(
        st.lists(st.text(min_size=1, max_size=8), min_size=min_names, max_size=max_names,
                 unique=True)
    )  # fmt: skip
    rows = draw(st.integers(0, 12))
    columns = []
    for name in names:
        dtype = draw(st.sampled_from(list(_VALUES)))
        is_list = lists and draw(st.booleans())
        value = st.lists(_VALUES[dtype], max_size=6) if is_list else _VALUES[dtype]
        nulls = draw(st.booleans())  # a column without nulls, or with some
        cell = st.one_of(st.none(), value) if nulls else value
        data = draw(st.lists(cell, min_size=rows, max_size=rows))
        columns.append((name, dtype, is_list, data))
    return columns


def _batch(columns) -> tuple[list[FeatureSpec], pa.RecordBatch]:
    features, arrays = [], []
    for name, dtype, is_list, data in columns:
        arrow = pa.list_(_ARROW[dtype]) if is_list else _ARROW[dtype]
        arrays.append(pa.array(data, arrow))
        features.append(FeatureSpec(name, dtype, None if is_list else [], True))
    return features, pa.RecordBatch.from_arrays(arrays, [f.name for f in features])


def _row_values(value, is_list) -> list:
    if value is None:
        return []
    return list(value) if is_list else [value]


def _feature(dtype: str, values: list) -> tf.train.Feature:
    if dtype == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if dtype == "float32":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def _protobuf_example(columns, row: int) -> bytes:
    """What protobuf writes for the row's Example with the map entries in the spec's order."""
    entries = b"".join(
        tf.train.Features(
            feature={name: _feature(dtype, _row_values(data[row], is_list))}
        ).SerializeToString()
        for name, dtype, is_list, data in columns
    )
    return b"\x0a" + _VarintBytes(len(entries)) + entries


def _same_float32(a: float, b: float) -> bool:
    pack = struct.Struct("<f").pack
    return pack(a) == pack(b) or (math.isnan(a) and math.isnan(b))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_columns())
def test_examples_are_protobufs_bytes_with_features_in_spec_order(columns):
    features, batch = _batch(columns)
    encoded = ExampleEncoder(features).encode(batch)
    assert encoded == [_protobuf_example(columns, row) for row in range(batch.num_rows)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_columns(min_names=8, max_names=30, lists=False))
def test_many_features_of_one_value_or_none_a_row_are_protobufs_bytes(columns):
    # Written all at once as cells (short runs of numbers without nulls among them); a run of
    # four or more numbers without nulls as a block; a row's Example is its cells end to end.
    features, batch = _batch(columns)
    encoded = ExampleEncoder(features).encode(batch)
    assert encoded == [_protobuf_example(columns, row) for row in range(batch.num_rows)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_columns().filter(lambda columns: len(columns[0][3]) > 0))
def test_tensorflows_parser_reads_back_every_value(columns):
    features, batch = _batch(columns)
    encoded = ExampleEncoder(features).encode(batch)
    spec = {name: tf.io.RaggedFeature(_TF[dtype]) for name, dtype, _, _ in columns}
    parsed = tf.io.parse_example(tf.constant(encoded), spec)
    for name, dtype, is_list, data in columns:
        got = parsed[name].to_list()
        for row, value in enumerate(data):
            expected = _row_values(value, is_list)
            assert len(got[row]) == len(expected), (name, row)
            if dtype == "float32":
                assert all(map(_same_float32, got[row], expected)), (name, row)
            else:
                assert got[row] == expected, (name, row)


def test_long_values_need_long_length_varints():
    text = bytes(range(256)) * 4096  # 1 MiB with every byte value, NUL included
    ints = list(range(-50_000, 50_000, 3))
    columns = [
        ("text", "bytes", False, [text, b"", None]),
        ("ints", "int64", True, [ints, [], None]),
        ("floats", "float32", True, [[float(i) for i in range(70_000)], [-0.0], None]),
    ]
    features, batch = _batch(columns)
    expected = [_protobuf_example(columns, row) for row in range(3)]
    assert ExampleEncoder(features).encode(batch) == expected


def test_a_float64_column_rounds_to_float32_and_a_null_list_is_empty_whatever_it_covers():
    features = [FeatureSpec("x", "float32", [], True), FeatureSpec("l", "int64", None, True)]
    # Row 1's list is null but its offsets cover two values: a null has no values.
    offsets, mask = pa.array([0, 1, 3, 4], pa.int32()), pa.array([False, True, False])
    lists = pa.ListArray.from_arrays(offsets, pa.array([1, 2, 3, 4]), mask=mask)
    batch = pa.RecordBatch.from_arrays([pa.array([0.1, None, 1e-50]), lists], ["x", "l"])
    parsed = tf.io.parse_example(
        tf.constant(ExampleEncoder(features).encode(batch)),
        {"x": tf.io.RaggedFeature(tf.float32), "l": tf.io.RaggedFeature(tf.int64)},
    )
    assert parsed["x"].to_list() == [[np.float32(0.1)], [], [0.0]]
    assert parsed["l"].to_list() == [[1], [], [4]]


@pytest.mark.parametrize(
    "value, expected",
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (2**64 - 1, b"\xff" * 9 + b"\x01")],
)  # fmt: skip
def test_varints_match_protobuf(value, expected):
    matrix, lengths = varints(np.array([value], dtype=np.uint64))
    assert matrix[0, : lengths[0]].tobytes() == expected == _VarintBytes(value)
    assert varint_lengths(np.array([value], dtype=np.uint64)).tolist() == [len(expected)]


def test_features_with_one_value_a_row_match_protobuf_whatever_the_lengths():
    # Consecutive float (or int) features with a value in every row are written as one block,
    # and a text feature with one value a row frames it in its header; a 200-byte key needs
    # two-byte length varints, and a null or a list ends a block.
    rows = 5
    floats = [float(i) - 2.5 for i in range(rows)]
    columns = [
        ("a", "float32", False, floats),
        ("k" * 200, "float32", False, [math.inf, -0.0, math.nan, 1e-45, 3.4e38]),
        ("é", "float32", False, floats),
        ("n", "int64", False, [0, -1, 2**63 - 1, 127, 128]),
        ("m", "int64", False, [-(2**63), 1, 300, 0, 5]),
        ("s", "bytes", False, [b"", b"x" * 300, b"\x00", "é".encode(), b"y" * 127]),
        ("b", "float32", False, floats),
        ("gap", "float32", False, [1.0, None, 2.0, 3.0, 4.0]),
        ("c", "float32", True, [[1.0]] * rows),
        ("d", "float32", False, floats),
    ]
    features, batch = _batch(columns)
    encoded = ExampleEncoder(features).encode(batch)
    assert encoded == [_protobuf_example(columns, row) for row in range(rows)]


def test_scalar_columns_without_nulls_share_one_read_only_offsets_array():
    columns = [
        ("x", "float32", False, [1.0, 2.0, 3.0]),
        ("n", "int64", False, [4, 5, 6]),
        ("gap", "float32", False, [1.0, None, 2.0]),
        ("l", "int64", True, [[1], [2, 3], []]),
        ("s", "bytes", False, [b"a", b"b", b"c"]),
    ]
    features, batch = _batch(columns)
    lists = ExampleEncoder(features).columns(batch)
    shared = lists[0][0]
    assert [offsets is shared for offsets, _ in lists] == [True, True, False, False, True]
    assert shared.tolist() == [0, 1, 2, 3] and not shared.flags.writeable
    assert lists[2][0].tolist() == [0, 1, 1, 2] and lists[3][0].tolist() == [0, 1, 3, 3]
    assert [v.type for _, v in lists[:2]] == [pa.float32(), pa.int64()]
    assert ExampleEncoder(features).encode(batch) == [
        _protobuf_example(columns, row) for row in range(3)
    ]


def test_number_columns_cast_together_hold_each_columns_own_cast():
    # Columns of one type without nulls are cast in one call and cut apart; each must hold
    # what casting it alone gives (float64 -> float32 rounding, overflow to infinity, -0.0,
    # NaN, subnormals; integers of another width; a float column of an int64 feature).
    from beam_jobs.codec.examples import TOGETHER_MIN_COLUMNS, value_lists

    rng = np.random.default_rng(3)
    rows, many = 7, TOGETHER_MIN_COLUMNS
    special = [-0.0, math.nan, 1e39, -1e39, 1e-45, 2.0**24 + 1, math.inf]
    arrays = {"f0": pa.array(special, pa.float64())}
    arrays |= {f"f{i}": pa.array(rng.normal(size=rows) * 10.0**i) for i in range(1, many)}
    arrays["gap"] = pa.array([1.0, None, 2.0, 3.0, 4.0, 5.0, 6.0], pa.float64())
    arrays |= {
        f"i{i}": pa.array(rng.integers(-(2**31), 2**31, rows), pa.int32()) for i in range(many + 1)
    }
    arrays["n0"] = pa.array([2**63 - 1, -(2**63), 0, 1, -1, 127, 128], pa.int64())
    arrays |= {f"n{i}": pa.array(rng.normal(size=rows) * 1e15) for i in range(1, many + 1)}
    arrays["one"] = pa.array([b"a"] * rows, pa.binary())
    dtypes = {"i1": "float32", "n0": "int64", "one": "bytes"}
    dtypes |= {f"i{i}": "int64" for i in range(many + 1) if i != 1}
    dtypes |= {f"n{i}": "int64" for i in range(1, many + 1)}  # floats of an int64 feature
    features = [FeatureSpec(name, dtypes.get(name, "float32")) for name in arrays]
    batch = pa.RecordBatch.from_arrays(list(arrays.values()), list(arrays))
    got = ExampleEncoder(features).columns(batch)
    # f0-f7 (float64 -> float32), i0 and i2-i8 (int32 -> int64), n1-n8 (float64 -> int64);
    # gap has a null, i1 (int32 -> float32) and n0 (int64 -> int64) are alone in theirs.
    expected = [f"f{i}" for i in range(many)] + [f"i{i}" for i in range(many + 1) if i != 1]
    expected += [f"n{i}" for i in range(1, many + 1)]
    assert sorted(cast_together(batch, features)) == sorted(expected)
    for feature, (offsets, values) in zip(features, got, strict=True):
        alone_offsets, alone = value_lists(batch.column(feature.name), feature.dtype)
        assert offsets.tolist() == alone_offsets.tolist(), feature.name
        assert values.type == alone.type, feature.name
        if feature.dtype == "bytes":
            assert values.to_pylist() == alone.to_pylist()
        else:  # bit for bit: -0.0 and NaN included
            assert values.to_numpy().tobytes() == alone.to_numpy().tobytes(), feature.name
    wide = pa.RecordBatch.from_arrays(
        [pa.array(np.arange(5000.0))] * many, [f"f{i}" for i in range(many)]
    )
    assert cast_together(wide, features[:many]) == {}  # more rows than TOGETHER_MAX_ROWS


def test_features_are_grouped_by_how_they_are_written():
    from beam_jobs.codec.example_wire import _segments

    # Few features of at most one value a row: each written alone, numbers without nulls in
    # blocks as before (no slower path for narrow rows).
    assert _segments(["int64", "cells", "int64", "float32", "cells"]) == [
        ("int64", [0]), ("entry", [1]), ("int64", [2]), ("float32", [3]), ("entry", [4]),
    ]  # fmt: skip
    # Eight or more side by side: one group of cells, short runs of numbers among them too;
    # a run of four numbers stays a block, and a list feature is an entry of its own.
    kinds = ["cells", "float32", "cells", "int64", "int64", "cells", "cells", "cells", "cells"]
    assert _segments([*kinds, "float32", "float32", "float32", "float32", "entry"]) == [
        ("cells", list(range(9))), ("float32", [9, 10, 11, 12]), ("entry", [13]),
    ]  # fmt: skip
