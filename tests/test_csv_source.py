import io

import pytest

from beam_jobs.csv_source import CsvDataError, infer_features, parse_sample, read_range
from tfdata_reader.manifest import FeatureSpec

HEAD = (
    b"i,f,s,mixed,empty,flag,ts\n"
    b"1,1.5,x,1,,true,2024-01-01\n"
    b'2,,"y, ""z""\nw",2.5,,false,2024-01-02\n'
    b"3,3,NA,3,,true,2024-01-03\n"
)


def test_parse_sample_cuts_at_the_last_complete_record():
    head = HEAD + b"4,4.5,partial"
    sample = parse_sample("a.csv", head, is_whole_file=False)
    assert sample.column_names == ["i", "f", "s", "mixed", "empty", "flag", "ts"]
    assert sample.data == HEAD
    assert sample.table.num_rows == 3


def test_infer_features():
    sample = parse_sample("a.csv", HEAD, is_whole_file=True)
    assert infer_features([sample]) == [
        FeatureSpec("i", "int64", [], False),
        FeatureSpec("f", "float32", [], True),
        FeatureSpec("s", "bytes", [], False),
        FeatureSpec("mixed", "float32", [], False),
        FeatureSpec("empty", "bytes", [], True),
        FeatureSpec("flag", "bytes", [], False),
        FeatureSpec("ts", "bytes", [], False),
    ]


def test_infer_features_merges_samples_and_applies_overrides():
    a = parse_sample("a.csv", b"n,m\n1,x\n", is_whole_file=True)
    b = parse_sample("b.csv", b"n,m\n2.5,y\n", is_whole_file=True)
    assert [f.dtype for f in infer_features([a, b])] == ["float32", "bytes"]
    overrides = [FeatureSpec("n", "bytes")]
    assert infer_features([a, b], overrides)[0] == FeatureSpec("n", "bytes", [], False)


def test_infer_features_rejects_different_headers_and_unknown_overrides():
    a = parse_sample("a.csv", b"n,m\n1,x\n", is_whole_file=True)
    b = parse_sample("b.csv", b"n,k\n2,y\n", is_whole_file=True)
    with pytest.raises(CsvDataError, match=r"b.csv: header \['n', 'k'\] differs from \['n', 'm'\]"):
        infer_features([a, b])
    with pytest.raises(CsvDataError, match=r"--schema names columns \['zz'\]"):
        infer_features([a], [FeatureSpec("zz", "int64")])


@pytest.mark.parametrize(
    "head, whole, message",
    [
        (b"", True, "a.csv: the file is empty"),
        (b"abc" * 10, False, "a.csv: no complete header line in the first 30 bytes"),
    ],
)
def test_parse_sample_errors(head, whole, message):
    with pytest.raises(CsvDataError, match=message):
        parse_sample("a.csv", head, is_whole_file=whole)


FEATURES = [FeatureSpec("a", "int64"), FeatureSpec("b", "bytes")]


def test_read_range_from_the_middle_uses_given_names():
    data = b"a,b\n1,x\n2,y\n3,z\n"
    batches = list(read_range(io.BytesIO(data), "a.csv", 8, 16, FEATURES))
    assert [b.to_pydict() for b in batches] == [{"a": [2, 3], "b": ["y", "z"]}]


def test_read_range_names_file_bytes_and_row_on_a_type_error():
    data = b"a,b\n1,x\nzz,y\n"
    with pytest.raises(CsvDataError) as e:
        list(read_range(io.BytesIO(data), "in/a.csv", 0, len(data), FEATURES))
    assert str(e.value) == (
        "in/a.csv: bytes 0-13: In CSV column #0: Row #3: CSV conversion error to int64: "
        "invalid value 'zz'; column types are inferred from a sample: set them with --schema"
    )


def test_read_range_rejects_a_different_header():
    data = b"a,c\n1,x\n"
    with pytest.raises(CsvDataError, match=r"in/a.csv: header \['a', 'c'\] differs from"):
        list(read_range(io.BytesIO(data), "in/a.csv", 0, len(data), FEATURES))


def test_read_range_rejects_wrong_column_count_and_bad_utf8():
    with pytest.raises(CsvDataError, match="in/a.csv: bytes 0-12: .*Expected 2 columns, got 3"):
        list(read_range(io.BytesIO(b"a,b\n1,x,9\n2,"), "in/a.csv", 0, 12, FEATURES))
    data = b"a,b\n1,\xff\xfe\n"
    with pytest.raises(CsvDataError, match="in/a.csv: bytes 0-9: .*invalid UTF8 data$"):
        list(read_range(io.BytesIO(data), "in/a.csv", 0, len(data), FEATURES))
