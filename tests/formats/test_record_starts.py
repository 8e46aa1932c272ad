"""Where CSV records start, against Python's csv module and pyarrow on the same bytes, at every
cut offset, with quoted newlines, doubled quotes and stray quotes inside unquoted fields."""

from __future__ import annotations

import csv
import io
import itertools
import random

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from beam_jobs.formats.csv import record_starts as rs
from beam_jobs.formats.lines import quotes
from beam_jobs.formats.lines.cut_counts import CutCounts, Segment, count_segment

# Field shapes real exports have, all read the same way by Python's csv module and pyarrow.
_FIELDS = [
    "plain",
    "",
    'TV 55" screen',  # a stray quote inside an unquoted field: literal
    'a""b',  # doubled quotes inside an unquoted field: literal too
    '"quoted, with comma"',
    '"two\nlines"',
    '"say ""hi"""',  # escaped quotes
    '""',  # an empty quoted field
    '"""lead"',  # a quoted field that starts with an escaped quote
    '"ab"cd',  # text after the closing quote joins the field
    '"x\n\n""y""\n"',
    '12"',
    '"',  # a field that is one quote... only in the last column of the last row (see below)
]


def _csv_file(rng: random.Random, rows: int, crlf: bool = False) -> tuple[bytes, list[int]]:
    """A CSV file and the true offset of every record start (the header's included)."""
    end = b"\r\n" if crlf else b"\n"
    lines, starts, offset = [b"h1,h2,h3" + end], [0], 0
    offset += len(lines[0])
    for _ in range(rows):
        fields = [rng.choice(_FIELDS[:-1]) for _ in range(3)]
        line = ",".join(fields).encode() + end
        starts.append(offset)
        lines.append(line)
        offset += len(line)
    return b"".join(lines), starts


def _truth(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode(), newline="")))


def _in_quotes_at(path: str, offset: int) -> bool:
    counted = count_segment(Segment(path, 0, offset)) if offset else None
    counts = CutCounts.from_counted([counted] if counted else [])
    return counts.in_quotes_at(path, offset)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("crlf", [False, True])
def test_every_offset_finds_the_record_that_python_csv_and_pyarrow_start_there(
    tmp_path, seed, crlf
):
    rng = random.Random(seed)
    data, starts = _csv_file(rng, rows=25, crlf=crlf)
    rows = _truth(data)
    assert len(rows) == len(starts)  # the generator's own check
    table = pcsv.read_csv(
        io.BytesIO(data),
        parse_options=pcsv.ParseOptions(newlines_in_values=True),
        convert_options=pcsv.ConvertOptions(
            column_types=dict.fromkeys(rows[0], pa.string()), strings_can_be_null=False
        ),
    )
    assert [list(r.values()) for r in table.to_pylist()] == rows[1:]
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    with open(path, "rb") as f:
        for offset in range(len(data) + 1):
            expected = next((s for s in starts if s >= offset), len(data))
            found = rs.record_start_at_or_after(
                f, offset, _in_quotes_at(str(path), offset), len(data)
            )
            assert found == expected, (offset, data[max(0, offset - 20) : offset + 20])


@pytest.mark.parametrize("seed", range(3))
def test_reading_pieces_cut_anywhere_gives_every_row_once(tmp_path, seed):
    from beam_jobs.core.inputs import Piece
    from beam_jobs.formats.csv.format import CsvFormat
    from beam_jobs.formats.lines.cut_counts import segments_between_cuts
    from tfdata_reader.manifest import FeatureSpec

    rng = random.Random(100 + seed)
    data, _ = _csv_file(rng, rows=200)
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    expected = _truth(data)[1:]
    features = [FeatureSpec(n, "bytes", [], True) for n in ("h1", "h2", "h3")]
    fmt = CsvFormat()
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(data)), 6))
        counts = CutCounts.from_counted(
            count_segment(s) for s in segments_between_cuts({str(path): cuts})
        )
        bounds = [0, *cuts, len(data)]
        got, bad = [], []
        for start, end in itertools.pairwise(bounds):
            piece = Piece(str(path), start, end, len(data))
            for batch in fmt.read_piece(piece, features, bad.append, counts):
                got.extend([v or "" for v in r.values()] for r in batch.to_pylist())
        assert bad == [] and got == expected


def test_a_quote_run_across_a_block_boundary_is_one_run(monkeypatch):
    monkeypatch.setattr(rs, "_SCAN_BLOCK", 7)
    data = b'a,"x""""""y\nz",b\nc,d\n'  # a run of six quotes, split by 7-byte blocks
    with io.BytesIO(data) as f:
        assert rs.record_start_at_or_after(f, 1, False, len(data)) == data.index(b"c,d")


@pytest.mark.parametrize(
    "block, in_quotes, expected",
    [
        (b"a,b\nc,d\n", False, [4, 8]),
        (b'a,"b\nc",d\n', False, [10]),
        (b'TV 55" x\nnext\n', False, [9, 14]),  # the stray quote is literal
        (b'x\ny"\n', True, [5]),  # inside quotes: the quote closes, then the field continues
        (b'"a""\nb"\n', False, [8]),
        (b"no newline", False, []),
    ],
)
def test_record_starts_table(block, in_quotes, expected):
    assert quotes.record_starts(block, in_quotes).tolist() == expected


def test_states_at_cuts_compose_from_segments_like_one_segment(tmp_path):
    rng = random.Random(5)
    data, _ = _csv_file(rng, rows=60)
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    for _ in range(60):
        a, b = sorted(rng.sample(range(1, len(data)), 2))
        two = CutCounts.from_counted(
            [count_segment(Segment(str(path), 0, a)), count_segment(Segment(str(path), a, b))]
        )
        one = CutCounts.from_counted([count_segment(Segment(str(path), 0, b))])
        assert two.in_quotes_at(str(path), b) == one.in_quotes_at(str(path), b), (a, b)
        assert two.newlines_before(str(path), b) == data[:b].count(b"\n")


def test_nonempty_record_starts_skip_blank_lines():
    data = b'h\n\na\r\n\r\n"b\n\nc"\nd\n'
    with io.BytesIO(data) as f:
        starts = rs.nonempty_record_starts(f, 0, len(data))
    assert starts.tolist() == [0, 3, 8, 15]
    assert np.array_equal(quotes.record_starts(b"abc\n" * 1000), np.arange(4, 4001, 4))


class _CountingFile(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        self.read_bytes += len(data)
        return data


def test_finding_the_next_record_reads_about_a_record_not_a_block():
    # 20,000 shards of one file cut it 40,000 times: each cut reads what it needs.
    row = b'1,"a ""quoted"" text",2.5\n'
    data = row * 200_000  # 5 MB
    f = _CountingFile(data)
    offset = len(data) // 2 + 3
    assert rs.record_start_at_or_after(f, offset, False, len(data)) == (
        len(data) // 2 // len(row) + 1
    ) * len(row)
    assert f.read_bytes <= 8 << 10
    # A record longer than the first steps is still found, past them.
    long = b"x" * 100_000 + b"\n"
    g = _CountingFile(long + row)
    assert rs.record_start_at_or_after(g, 5, False, len(long + row)) == len(long)
