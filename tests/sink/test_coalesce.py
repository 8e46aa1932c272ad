import pyarrow as pa
import pytest

from beam_jobs.core.inputs import Piece
from beam_jobs.sink.coalesce import Coalescer, piece_of_row


def _piece(name: str) -> Piece:
    return Piece(name, 0, 10, 10)


def _batch(start: int, rows: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(start, start + rows))], names=["x"])


def test_small_batches_are_joined_in_order_and_know_their_pieces():
    a, b, c = _piece("a"), _piece("b"), _piece("c")
    joiner = Coalescer(min_rows=5)
    assert list(joiner.add(_batch(0, 2), a)) == []
    assert list(joiner.add(_batch(2, 2), b)) == []
    ((batch, sources),) = joiner.add(_batch(4, 3), c)
    assert batch.column(0).to_pylist() == list(range(7))
    assert sources == ((a, 2), (b, 2), (c, 3))
    assert [piece_of_row(sources, row) for row in range(7)] == [a, a, b, b, c, c, c]
    with pytest.raises(IndexError):
        piece_of_row(sources, 7)
    assert list(joiner.flush()) == []


def test_a_large_batch_passes_alone_and_a_new_schema_flushes_what_is_held():
    a, b = _piece("a"), _piece("b")
    joiner = Coalescer(min_rows=5)
    big = _batch(0, 9)
    assert list(joiner.add(big, a)) == [(big, ((a, 9),))]
    assert list(joiner.add(_batch(0, 1), a)) == []
    other = pa.record_batch([pa.array(["z"])], names=["x"])
    ((held, sources),) = joiner.add(other, b)
    assert (held.column(0).to_pylist(), sources) == ([0], ((a, 1),))
    ((last, sources),) = joiner.flush()
    assert (last.column(0).to_pylist(), sources) == (["z"], ((b, 1),))
