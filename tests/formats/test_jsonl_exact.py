"""JSON lines read exactly or dead-lettered with a reason, never silently altered: checked
against Python's json module on the same lines."""

from __future__ import annotations

import json

import pytest
from support.datasets import convert, read_all

from beam_jobs.formats.jsonl import chunks
from tfdata_reader.manifest import FeatureSpec

BIG = 2**53 + 1  # the first integer a double cannot hold


def _dead(out, manifest) -> list[dict]:
    rows = []
    for name in manifest.dead_letter:
        rows += [json.loads(line) for line in (out / name).read_text().splitlines()]
    return rows


def test_big_integers_stay_exact_when_a_chunk_also_holds_floats(tmp_path):
    path = tmp_path / "ids.jsonl"
    lines = [json.dumps({"id": BIG + i, "score": 0.5}) for i in range(3000)]
    lines[2500] = json.dumps({"id": 1.5, "score": 0.5})  # past the sampled head
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4096", "--max_bad_fraction=0.01")
    assert manifest.feature("id").dtype == "int64"
    expected = sorted(json.loads(line)["id"] for i, line in enumerate(lines) if i != 2500)
    assert sorted(r["id"] for r in read_all(out)) == expected
    [letter] = _dead(out, manifest)
    assert letter["line"] == 2501 and "id" in letter["reason"]


def test_keys_first_seen_after_the_sample_are_counted(tmp_path, capsys):
    from beam_jobs.cli import main

    path = tmp_path / "late.jsonl"
    lines = [json.dumps({"id": i}) for i in range(2000)]
    lines += [json.dumps({"id": i, "late": "x", "deep": {"k": i}}) for i in range(2000, 2010)]
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    argv = ["convert", "--input", str(path), "--output", str(out), "--sample_bytes=4096"]
    assert main([*argv, "--direct_running_mode=in_memory", "--direct_num_workers=1"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["ignored_fields"] == {"deep.k": 10, "late": 10}
    printed = capsys.readouterr().out
    assert "20 values of 2 keys that are not features were left out: deep.k (10), late (10)" in (
        printed
    )


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"id": 7, "id": 8}', "duplicate key 'id'"),
        ('{"id": 1e400}', "the number 1e400 is beyond a double's range: it would be inf"),
        ('{"id": ' + '{"a": ' * 5000 + "1" + "}" * 5001, "nested"),
        ('{"id": 3, "a.b": 1, "a": {"b": 2}}', "given twice"),
        ('{"id": {"x": 1}}', "feature 'id': an object where a value is expected"),
        ('{"id": 12345678901234567890}', "id"),
        ("[1, 2]", "not a JSON object"),
        ('{"id": NaN}', "Float value nan was truncated converting to int64"),
    ],
    ids=["duplicate", "1e400", "depth5000", "dotted_collision", "object", "beyond_int64",
         "array", "nan"],
)  # fmt: skip
def test_a_bad_line_is_a_dead_letter_with_its_reason(tmp_path, line, reason):
    path = tmp_path / "one_bad.jsonl"
    good = [json.dumps({"id": i}) for i in range(700)]
    # Past the sampled head (about 300 lines), so the spec is inferred from good lines only.
    path.write_text("\n".join([*good[:450], line, *good[450:]]) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--sample_bytes=4096")
    assert (manifest.total_records, manifest.counts.bad_records) == (700, 1)
    [letter] = _dead(out, manifest)
    assert letter["line"] == 451 and reason in letter["reason"], letter["reason"]
    assert sorted(r["id"] for r in read_all(out)) == list(range(700))


def test_a_few_mistyped_lines_cost_a_few_extra_parses_not_one_per_line(monkeypatch):
    parsed = []
    read_json = chunks.pj.read_json

    def counting(source, **kwargs):
        parsed.append(len(source.getbuffer()))
        return read_json(source, **kwargs)

    monkeypatch.setattr(chunks.pj, "read_json", counting)
    lines = [json.dumps({"id": i, "name": f"n{i}"}) for i in range(40_000)]
    for i in (100, 20_000, 39_000):
        lines[i] = json.dumps({"id": i, "name": 5})  # a number where the key holds text
    chunk = ("\n".join(lines) + "\n").encode()
    features = [FeatureSpec("id", "int64"), FeatureSpec("name", "bytes")]
    bad = []
    batches = chunks.read_chunk(chunk, 0, "f.jsonl", features, bad.append)
    assert sum(batch.num_rows for batch in batches) == 39_997 and len(bad) == 3
    assert sum(parsed) <= 6 * len(chunk), sum(parsed) / len(chunk)
    assert len(parsed) < 150


def _good_line(i: int) -> bytes:
    tags = None if i % 7 == 0 else [f"t{i}", "x"]
    return json.dumps({"id": i, "a": i % 5, "ids": [i, BIG + i], "t": f"s{i}", "tags": tags})


def _deep(depth: int) -> str:
    return '{"id": 1, "x": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


# Each line below is wrong in a way pyarrow alone would let through, alter, or crash on; each
# must be a dead letter (Python's json module is the judge of which lines are records).
HOSTILE = {
    "two_objects": b'{"id": 1000, "a": 1} {"id": 1001, "a": 2}',
    "carriage_return_inside": b'{"id": 1002}\r{"id": 1003}',
    "form_feed_only": b"\x0c",
    "deep_400": _deep(400).encode(),
    "deep_100000": _deep(100_000).encode(),
    "deep_array": b'{"id": 1, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "rounded_in_list": b'{"id": 1, "ids": [9007199254740993, 2.0]}',
    "below_int64": b'{"id": -9223372036854775809}',
    "above_int64_list": b'{"id": 1, "ids": [9223372036854775808]}',
    "dotted_key": b'{"id": 1001, "a.x": 5}',
    "empty_object": b'{"id": 1, "a": {}}',
    "object_of_null": b'{"id": 1, "a": {"b": null}}',
    "not_utf8": b'{"id": 1, "t": "ab\xffcd"}',
    "mistyped": b'{"id": "3000", "tags": null}',
    "number_as_text": b'{"id": 1, "t": 5}',
}


def test_hostile_lines_are_dead_letters_and_every_other_line_is_exact(tmp_path):
    good = [_good_line(i).encode() for i in range(3000)]
    lines = list(good)
    at = {}
    for k, (name, line) in enumerate(HOSTILE.items()):
        at[name] = 600 + 150 * k  # past the sampled head, spread over chunks and parts
        lines.insert(at[name], line)
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=8192", "--max_bad_fraction=0.01")
    counts = manifest.counts
    assert (manifest.total_records, counts.bad_records) == (3000, len(HOSTILE))
    assert counts.records_read == len(lines)
    letters = {letter["line"]: letter for letter in _dead(out, manifest)}
    assert sorted(letters) == sorted(lines.index(line) + 1 for line in HOSTILE.values())
    expected = [json.loads(line) for line in good]
    got = sorted(read_all(out), key=lambda row: row["id"])
    assert [r["id"] for r in got] == [e["id"] for e in expected]
    assert [r["ids"] for r in got] == [e["ids"] for e in expected]
    assert [r["a"] for r in got] == [e["a"] for e in expected]
    assert [r["tags"] for r in got] == [[t.encode() for t in e["tags"] or []] for e in expected]


@pytest.mark.parametrize("bad_every", [10_000, 100])
def test_mistyped_lines_among_lists_and_nulls_are_dead_letters(bad_every):
    # Parts split apart differ in layout (a part with no list values); each is its own batch.
    lines = [_good_line(i) for i in range(20_000)]
    for i in range(7, len(lines), bad_every):
        lines[i] = json.dumps({"id": str(i), "tags": None})
    chunk = ("\n".join(lines) + "\n").encode()
    features = [
        FeatureSpec("id", "int64"),
        FeatureSpec("ids", "int64", None),
        FeatureSpec("tags", "bytes", None),
    ]
    bad = []
    batches = chunks.read_chunk(chunk, 0, "f.jsonl", features, bad.append)
    mistyped = len(range(7, len(lines), bad_every))
    assert len(bad) == mistyped and all("'id'" in b.reason for b in bad)
    ids = [i for batch in batches for i in batch.column("id").to_pylist()]
    assert ids == [i for i in range(20_000) if i < 7 or (i - 7) % bad_every]


@pytest.mark.parametrize("sampled", [True, False])
def test_a_json_array_among_json_lines_files_is_read_as_records(tmp_path, sampled):
    folder = tmp_path / "in"
    folder.mkdir()
    array = folder / ("a.json" if sampled else "z.json")  # 12 files: not all are sampled
    array.write_text('[\n  {"id": 100},\n  {"id": 101}\n]\n')
    for i in range(11):
        (folder / f"f{i:02d}.json").write_text(json.dumps({"id": i}) + "\n")
    out = tmp_path / "out"
    convert([str(folder)], out, "--format=jsonl")
    assert sorted(r["id"] for r in read_all(out)) == [*range(11), 100, 101]


@pytest.mark.parametrize("source", ["jsonl", "parquet"])
def test_a_null_inside_a_list_is_a_dead_letter_not_a_zero(tmp_path, source):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": i, "li": [i, i + 1], "ls": ["a", f"s{i}"]} for i in range(1000)]
    rows[600] = {"id": 600, "li": [1, None, 3], "ls": ["a"]}
    rows[700] = {"id": 700, "li": [7], "ls": [None]}
    path = tmp_path / f"lists.{source}"
    if source == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--sample_bytes=4096")
    assert (manifest.total_records, manifest.counts.bad_records) == (998, 2)
    reasons = [letter["reason"] for letter in _dead(out, manifest)]
    assert all("a list with a null element" in reason for reason in reasons), reasons
    got = {r["id"]: (r["li"], [s.decode() for s in r["ls"]]) for r in read_all(out)}
    assert got == {r["id"]: (r["li"], r["ls"]) for r in rows if r["id"] not in (600, 700)}


def test_date_like_text_stays_text_whatever_the_sample_saw(tmp_path):
    # A bad line in the sampled head, and a key whose later values all look like dates.
    lines = [json.dumps({"id": i, "d": "2024-01-02", "note": f"hello {i}"}) for i in range(3000)]
    lines[100] = "this is not json"
    lines[2000:] = [json.dumps({"id": i, "d": "2024-01-02", "note": "2024-03-01"})
                    for i in range(2000, 3000)]  # fmt: skip
    path = tmp_path / "dates.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--sample_bytes=8192")
    assert (manifest.total_records, manifest.counts.bad_records) == (2999, 1)
    expected = {e["id"]: e for e in (json.loads(x) for i, x in enumerate(lines) if i != 100)}
    got = {r["id"]: r for r in read_all(out)}
    assert {i: r["note"].decode() for i, r in got.items()} == {
        i: e["note"] for i, e in expected.items()
    }


def test_text_in_a_number_feature_is_a_dead_letter_not_parsed(tmp_path):
    lines = [json.dumps({"id": i, "x": i / 4}) for i in range(2000)]
    for i, text in ((1500, "2.5"), (1600, "NaN"), (1700, "-inf")):
        lines[i] = json.dumps({"id": i, "x": text})
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--sample_bytes=4096")
    assert (manifest.total_records, manifest.counts.bad_records) == (1997, 3)
    letters = _dead(out, manifest)
    assert sorted(letter["line"] for letter in letters) == [1501, 1601, 1701]
    assert all("text where a number is expected" in letter["reason"] for letter in letters)


def test_an_empty_key_is_left_out_and_counted(tmp_path):
    lines = [json.dumps({"id": i}) for i in range(100)]
    lines[10] = json.dumps({"id": 10, "": 5})
    path = tmp_path / "e.jsonl"
    path.write_text("\n".join(lines) + "\n")
    manifest = convert([str(path)], tmp_path / "out")
    assert [f.name for f in manifest.features] == ["id"]
    assert manifest.counts.ignored_fields == {"": 1}
    assert sorted(r["id"] for r in read_all(tmp_path / "out")) == list(range(100))


@pytest.mark.parametrize("seed", range(6))
def test_rows_and_bad_lines_keep_the_input_order_whatever_the_layouts(seed):
    import random

    from beam_jobs.core.bad_rows import BadRow

    rng = random.Random(seed)
    values = ["1", '"a"', "[1, 2]", '{"o": 1}', '"\\ud800x"', '"\\udc00"', "nul", "2.5", "[]"]
    lines = [f'{{"id": {i}, "v": {rng.choice(values)}}}' for i in range(400)]
    chunk = ("\n".join(lines) + "\n").encode()
    features = [FeatureSpec("id", "int64", [], False), FeatureSpec("v", "bytes", None, True)]
    bad: list[BadRow] = []
    batches = chunks.read_chunk(chunk, 0, "f.jsonl", features, bad.append)
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert ids == sorted(ids)
    bad_ids = [json_id(row.content["raw"]) for row in bad]
    assert bad_ids == sorted(bad_ids)
    assert sorted(ids + bad_ids) == list(range(400))


def json_id(raw: str) -> int:
    return int(raw.split(",", 1)[0].removeprefix('{"id": '))


@pytest.mark.parametrize("bad_at", [0, 1, 3])
def test_a_mistyped_first_line_leaves_the_rest_in_order(bad_at):
    # pyarrow rejects the line after a mistyped one too; that line was parsed after the rest,
    # and with the bad line's part empty, the one part left was returned unsorted ([2, 3, 1]).
    lines = [json.dumps({"id": i, "x": i + 0.5}) for i in range(5)]
    lines[bad_at] = json.dumps({"id": bad_at, "x": "oops"})
    chunk = ("\n".join(lines) + "\n").encode()
    features = [FeatureSpec("id", "int64", [], False), FeatureSpec("x", "float32", [], False)]
    bad: list = []
    batches = chunks.read_chunk(chunk, 0, "f.jsonl", features, bad.append)
    assert [i for b in batches for i in b.column("id").to_pylist()] == [
        i for i in range(5) if i != bad_at
    ]
    assert [row.offset for row in bad] == [sum(len(line) + 1 for line in lines[:bad_at])]


def test_a_file_whose_first_line_is_mistyped_converts_in_order(tmp_path):
    path = tmp_path / "first_bad.jsonl"
    rows = [{"id": 0, "x": "oops"}, *({"id": i, "x": i + 0.5} for i in range(1, 4))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    schema = tmp_path / "schema.json"  # x is a number whatever the sample says
    schema.write_text(json.dumps({"features": [{"name": "x", "dtype": "float32"}]}))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.5", f"--schema={schema}")
    assert [r["id"] for r in read_all(out)] == [1, 2, 3]
    assert [d["line"] for d in _dead(out, manifest)] == [1]


@pytest.mark.parametrize("every", [500, 7])
def test_a_key_that_is_a_number_on_some_lines_and_a_list_on_others_is_a_list_feature(
    tmp_path, every
):
    # It crashed planning ("Schema at index 1 was different"); each record holds its values.
    lines = [{"id": i, "tags": [i, i + 1] if i % every == every - 1 else i} for i in range(3000)]
    lines[10]["tags"] = None
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("tags").shape is None and manifest.total_records == 3000
    got = {r["id"]: r["tags"] for r in read_all(tmp_path / "out")}
    want = {
        line["id"]: [] if line["tags"] is None else
        line["tags"] if isinstance(line["tags"], list) else [line["tags"]]
        for line in lines
    }  # fmt: skip
    assert got == want
