"""Cut counts: quotes and newlines before each cut, and newlines before offsets of a stream."""

from __future__ import annotations

from beam_jobs.formats.lines.cut_counts import (
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


def test_counts_before_cuts_are_running_sums_of_segments(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(DATA)
    cuts = {str(path): [5, 12, 20]}
    segments = segments_between_cuts(cuts)
    assert [(s.start, s.end) for s in segments] == [(0, 5), (5, 12), (12, 20)]
    counts = CutCounts.from_counted(reversed([count_segment(s) for s in segments]))
    assert [counts.quotes_before(str(path), o) for o in (0, 5, 12, 20)] == [0, 0, 2, 4]
    assert [counts.newlines_before(str(path), o) for o in (0, 5, 12, 20)] == [0, 1, 3, 5]
