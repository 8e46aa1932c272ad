import csv
import io
import random

import numpy as np
import pytest

from beam_jobs.formats.csv.record_starts import (
    count_quotes,
    first_record_start,
    record_start_at_or_after,
    record_starts,
)


@pytest.mark.parametrize(
    "block, quotes_before, expected",
    [
        (b"a,b\n1,2\n", 0, [4, 8]),
        (b'1,"x\ny"\n2,z\n', 0, [8, 12]),
        (b'x\ny"\n2,z\n', 1, [5, 9]),  # starts inside a quoted field
        (b'1,"a""\nb"\n', 0, [10]),  # doubled quote inside quotes
        (b"no newline", 0, []),
        (b'"\n"\n', 0, [4]),
    ],
)
def test_record_starts(block, quotes_before, expected):
    assert record_starts(block, quotes_before).tolist() == expected


def test_first_record_start_none_without_unquoted_newline():
    assert first_record_start(b'"a\nb', 0) is None
    assert first_record_start(b"a\nb", 1) is None
    assert first_record_start(b"a\nb", 2) == 2


def _reference_starts(data: bytes) -> list[int]:
    """Record start offsets found by Python's csv module, one row at a time."""
    text = data.decode("utf-8")
    lines = text.split("\n")
    reader = csv.reader(io.StringIO(text, newline=""))
    starts = [0]
    for _ in reader:  # a record ends after the physical line line_num
        starts.append(len("\n".join(lines[: reader.line_num]).encode("utf-8")) + 1)
    return sorted(set(starts))


def test_record_start_at_or_after_every_offset_matches_csv_module():
    rng = random.Random(3)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    pieces = ["plain", 'say "hi"', "two\nlines", "a,b", '"\n"', "", "ü"]
    for i in range(60):
        writer.writerow([i, rng.choice(pieces), rng.choice(pieces)])
    data = out.getvalue().encode("utf-8")
    starts = _reference_starts(data)
    f = io.BytesIO(data)
    for offset in range(len(data) + 1):
        quotes_before = count_quotes(data[:offset])
        expected = next(s for s in [*starts, len(data)] if s >= offset)
        start, quotes = record_start_at_or_after(f, offset, quotes_before, len(data))
        assert start == expected, offset
        assert quotes == count_quotes(data[:start])


def test_record_start_scans_across_blocks(monkeypatch):
    import beam_jobs.formats.csv.record_starts as csv_ranges

    monkeypatch.setattr(csv_ranges, "_SCAN_BLOCK", 4)
    data = b'h\n"aaaaaaaaa\nbbbbbbbbbb\ncc"\nnext\n'
    start, _ = record_start_at_or_after(io.BytesIO(data), 3, 1, len(data))
    assert start == data.index(b"next")
    assert record_start_at_or_after(io.BytesIO(data), 0, 0, len(data)) == (0, 0)
    assert record_start_at_or_after(io.BytesIO(data), len(data), 2, len(data)) == (len(data), 2)


def test_record_starts_handles_large_blocks():
    data = b"1,2\n" * 100_000
    assert np.array_equal(record_starts(data, 0), np.arange(4, len(data) + 1, 4))
