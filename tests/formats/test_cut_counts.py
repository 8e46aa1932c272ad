"""Cut counts: the quote state and newlines at each cut, and newlines before offsets of a stream."""

from __future__ import annotations

from beam_jobs.formats.lines.cut_counts import (
    Counting,
    CutCounts,
    count_lines_to,
    count_segment,
    segments_between_cuts,
)

DATA = b'a,b\n1,"x\ny"\n\n2,"z"\n3,w\n'


def test_newlines_before_every_offset_with_every_chunking():
    offsets = list(range(len(DATA) + 1))
    expected = [DATA[:o].count(b"\n") for o in offsets]
    for size in range(1, len(DATA) + 2):
        chunks = [DATA[i : i + size] for i in range(0, len(DATA), size)]
        assert count_lines_to(iter(chunks), offsets) == expected, size
        assert count_lines_to(iter(chunks), [3, 11, 17]) == [0, 2, 4], size
        # Offsets past the stream's end count all of its newlines; none asked, none given.
        assert count_lines_to(iter(chunks), [17, 99, 100]) == [4, 6, 6], size
        assert count_lines_to(iter(chunks), []) == [], size


def test_counts_before_cuts_are_running_sums_of_segments(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(DATA)
    cuts = {str(path): [8, 12, 20]}
    segments = segments_between_cuts(cuts)
    assert [(s.start, s.end) for s in segments] == [(0, 8), (8, 12), (12, 20)]
    counts = CutCounts.from_counted(reversed([count_segment(s) for s in segments]))
    # offset 8 is inside "x\ny"; 12 follows its close; 20 is in 3,w.
    assert [counts.in_quotes_at(str(path), o) for o in (0, 8, 12, 20)] == [
        False,
        True,
        False,
        False,
    ]
    assert [counts.newlines_before(str(path), o) for o in (0, 8, 12, 20)] == [0, 1, 3, 5]


def test_json_lines_segments_count_newlines_only(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": "\\"x"}\n' * 10)
    (segment,) = segments_between_cuts({str(path): [30]}, Counting(quotes=False))
    counted = count_segment(segment)
    assert (counted.newlines, counted.effect.resets, counted.effect.flips) == (2, False, 0)


def test_a_file_cut_short_after_planning_is_named_not_an_index_error(tmp_path):
    import pytest

    from beam_jobs.core.errors import DataError
    from beam_jobs.core.inputs import stamp_of

    path = tmp_path / "in.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 1000)
    stamp = stamp_of(str(path))
    segments = segments_between_cuts({str(path): [1000, 3000]}, Counting(True, ","), {})
    listed = segments_between_cuts({str(path): [1000, 3000]}, Counting(True, ","),
                                   {str(path): stamp})  # fmt: skip
    path.write_bytes(b"a,b\n" + b"1,2\n" * 100)  # 404 bytes now
    with pytest.raises(DataError, match=r"in\.csv: the input file ends at byte 404, short of "
                       r"byte 1,000 where the plan cut it: it was cut short"):  # fmt: skip
        count_segment(segments[0])
    with pytest.raises(DataError, match=r"in\.csv: the input file ends before byte 1,000, "
                       r"short of byte 3,000"):  # fmt: skip
        count_segment(segments[1])  # its start is past the end
    with pytest.raises(DataError, match=r"in\.csv: the input file changed while it was converted"):
        count_segment(listed[0])
