import pyarrow as pa

from beam_jobs.schema.conform import conform, infer_from_table, merge_features
from tfdata_reader.manifest import FeatureSpec


def test_infer_maps_arrow_types_and_list_shapes():
    table = pa.table(
        {
            "i": pa.array([1, 2], pa.int16()),
            "b": [True, None],
            "f": pa.array([1.5, 2.5], pa.float64()),
            "s": ["x", "y"],
            "l": [[1, 2], []],
            "fixed": [[1.0, 2.0], [3.0, 4.0]],
        }
    )
    assert infer_from_table(table) == [
        FeatureSpec("i", "int64", []),
        FeatureSpec("b", "int64", [], nullable=True),
        FeatureSpec("f", "float32", []),
        FeatureSpec("s", "bytes", []),
        FeatureSpec("l", "int64", None, nullable=True),
        FeatureSpec("fixed", "float32", None),
    ]
    assert infer_from_table(table, scalar_lists=True)[-1] == FeatureSpec("fixed", "float32", [2])


def test_merge_widens_types_and_marks_missing_columns_nullable():
    merged = merge_features(
        [[FeatureSpec("a", "int64"), FeatureSpec("b", "int64")], [FeatureSpec("a", "float32")]],
        overrides=[FeatureSpec("z", "bytes")],
    )
    assert merged == [
        FeatureSpec("a", "float32"),
        FeatureSpec("b", "int64", nullable=True),
        FeatureSpec("z", "bytes"),
    ]


def test_conform_names_each_bad_row_and_keeps_the_rest():
    table = pa.table({"n": [[1], [2, 3], [4], None], "s": ["a", "b", "c", "d"]})
    features = [
        FeatureSpec("n", "int64", []),
        FeatureSpec("s", "bytes", []),
        FeatureSpec("m", "float32"),
    ]
    batch, bad = conform(table, features)
    assert bad == {1: "feature 'n' (int64, shape []): 2 values where 1 are expected"}
    assert batch.to_pydict() == {"n": [[1], [4], None], "s": [b"a", b"c", b"d"], "m": [None] * 3}
