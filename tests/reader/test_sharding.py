import pytest

from tfdata_reader.sharding import BY_FILE, BY_RECORD, FileRange, plan_reads


@pytest.mark.parametrize(
    "counts, n, i, expected",
    [
        (
            [5, 5, 5],
            1,
            0,
            (BY_FILE, [FileRange(0, 0, 5, 5), FileRange(1, 0, 5, 5), FileRange(2, 0, 5, 5)]),
        ),
        (
            [5, 6, 7, 8, 9],
            2,
            0,
            (BY_FILE, [FileRange(0, 0, 5, 5), FileRange(2, 0, 7, 7), FileRange(4, 0, 9, 9)]),
        ),
        ([5, 6, 7, 8, 9], 2, 1, (BY_FILE, [FileRange(1, 0, 6, 6), FileRange(3, 0, 8, 8)])),
        ([10, 4], 3, 0, (BY_RECORD, [FileRange(0, 0, 4, 10)])),
        ([10, 4], 3, 1, (BY_RECORD, [FileRange(0, 4, 9, 10)])),
        ([10, 4], 3, 2, (BY_RECORD, [FileRange(0, 9, 10, 10), FileRange(1, 0, 4, 4)])),
        ([7], 2, 1, (BY_RECORD, [FileRange(0, 3, 7, 7)])),
        ([1], 3, 0, (BY_RECORD, [])),  # fewer records than pipelines: some get nothing
    ],
)
def test_plan_reads(counts, n, i, expected):
    assert plan_reads(counts, n, i) == expected


@pytest.mark.parametrize("counts", [[3], [100, 1, 0, 57], [9, 9, 9, 9, 9, 9, 9], [0, 0, 12]])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_every_record_exactly_once(counts, n):
    seen = []
    for i in range(n):
        _, ranges = plan_reads(counts, n, i)
        seen.extend((r.shard_index, k) for r in ranges for k in range(r.start, r.stop))
    assert sorted(seen) == [(s, k) for s, c in enumerate(counts) for k in range(c)]


def test_plan_reads_rejects_bad_pipeline():
    with pytest.raises(ValueError, match="pipeline_id must be in \\[0, 2\\)"):
        plan_reads([1, 2], 2, 2)
