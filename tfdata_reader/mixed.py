"""Several sources in one epoch order, each read on from where it stands: pure arithmetic.

`order.epoch_plan` reads one source (one dataset, or several read as one unit list). Several
sources (partitions, or datasets with weights) are read so that the weights may change at any
step of an epoch without a record read twice or left out:

1. **Parts.** The epoch's sequence (`sequence.EpochSequence`: each source's own sequence,
   interleaved by the quotas of the weights the epoch began with) is cut into `streams` as one
   source's is; stream `j`'s *part* of source `i` is the run of the source's own sequence it
   holds, `P_ij` records (of a quota over several passes: its share of each pass in turn).
   Read past its end (a source whose share grew), a part goes on with its even share of the
   rest of the source's pass (after its quota), then of each next pass: parts never meet.
2. **Windows.** A stream reads each of its parts' runs in order, in windows (a run cut into
   about `window * chunk * P_ij / stream length` records, the first run's first ramping up from
   a step's share, doubling; a window never spans two runs), each permuted: a
   source's records come out of a stream in an order fixed by the part.
3. **Counts.** Each step takes from each stream `chunk` records: a drawn number of each source
   (a stream's positions hold each source its share, `mixing.taken`, and those tags are
   permuted: the counts spread as a random sample's), each source's next records.
4. **Segments.** Weights given from step `s` on share the rest of the epoch (the records
   `s * global_batch` on) by quota as the epoch's start did; each source of each stream goes on
   from where the steps before `s` left it, each stream's count of it bounded (`mixing.allot`)
   so that no stream reads a pass of the source while another leaves an earlier one unread.

Resuming at step `s` reads each part from the window that holds its `s`-th step's record on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np

from tfdata_reader.mixing import allot, apportion, taken
from tfdata_reader.order import Sharing
from tfdata_reader.sequence import EpochSequence, Piece, draws

__all__ = ["MixedPlan", "MixedStream", "SourceRead", "mixed_plan"]

_TAG_KEY = 0x746167  # "tag": each stream's draw of which source each of its positions takes
_WINDOW_KEY = 0x77696E  # "win": each part's window keys
# A part of a quota over at most this many passes of its source is read pass by pass (each
# pass a run and windows of its own); one over more, as one run (a weight change may then
# read a few records of a source's next pass while some of this one's are left unread).
_LANE_PASSES = 64


@dataclasses.dataclass(frozen=True)
class SourceRead:
    """What a stream reads of one source.

    Attributes:
      pieces: the part's records of the windows read, in order.
      windows: each window's records (the first read first).
      first_window: the index of the first window read (a part's windows count from 0).
      skip: records of the first window (permuted) taken before the start step.
      records: records taken from the start step on.
      key: the key of the part's window permutations (with each window's index).
    """

    pieces: tuple[Piece, ...]
    windows: tuple[int, ...]
    first_window: int
    skip: int
    records: int
    key: int


@dataclasses.dataclass(frozen=True)
class MixedStream:
    """What one input pipeline reads of one stream.

    Attributes:
      stream: the stream's index.
      full_slice: this pipeline's part [lo, hi) of each full step's chunk.
      final_slice: its part of the stream's records of the final, partial step.
      sources: each source's reads, in source order.
      tags: the source of each of the stream's positions from the start step on (full steps'
        `chunk` each, then the final step's): a position takes that source's next record.
    """

    stream: int
    full_slice: tuple[int, int]
    final_slice: tuple[int, int]
    sources: tuple[SourceRead, ...]
    tags: np.ndarray = dataclasses.field(compare=False)


@dataclasses.dataclass(frozen=True)
class MixedPlan:
    """One input pipeline's reads of one epoch of several sources, from the start step on."""

    chunk: int
    streams: tuple[MixedStream, ...]  # those this pipeline takes a part of, in stream order
    full_steps: int
    share: int
    has_final: bool  # whether the steps read end with a final, partial step

    @property
    def final_records(self) -> int:
        return sum(s.final_slice[1] - s.final_slice[0] for s in self.streams)


Segment = tuple[int, tuple[float, ...] | None]  # (first step, weights from it on)


def mixed_plan(
    sequence: EpochSequence,
    sharing: Sharing,
    *,
    start_step: int = 0,
    window: int = 1,
    segments: Sequence[Segment] = (),
) -> MixedPlan:
    """What one input pipeline reads of an epoch of several sources.

    Args:
      sequence: the epoch's sequence, with the weights the epoch began with.
      sharing: the global batch, streams and pipelines.
      start_step: the first step read.
      window: steps a stream's windows hold (`order.window_steps`).
      segments: weights changed within the epoch, each from a step on (at most `start_step`).

    Raises:
      ValueError: for a start step past the epoch's end.
    """
    streams, chunk = sharing.streams, sharing.chunk
    total = sequence.length
    full, partial = sharing.steps(total, start_step)
    slices = sharing.slices()
    bounds = np.array(sharing.bounds(total), np.int64)
    lengths = np.diff(bounds)
    tails = lengths - full * chunk if partial else np.zeros_like(lengths)
    parts = sequence.counts(bounds)  # [sources, streams + 1]: where each stream's parts start
    tags = _tags(sequence, parts, lengths, chunk, segments)
    begin, end = start_step * chunk, full * chunk  # the positions read, of each stream
    sources = len(sequence.units)
    keys = draws(sequence.seed, sequence.epoch, streams * sources, _WINDOW_KEY) >> np.uint64(1)
    found = []
    for j, (lo, hi) in enumerate(slices):
        final = (int(tails[j] * lo // chunk), int(tails[j] * hi // chunk))
        rest = tags[j][begin : end + int(tails[j])] if begin <= end else tags[j][:0]
        if lo >= hi or not len(rest):
            continue
        done = np.bincount(tags[j][:begin], minlength=sources)
        need = np.bincount(rest, minlength=sources)
        reads = []
        for i in range(sources):
            part = _Part(
                sequence, i, j, int(parts[i, j]), int(parts[i, j + 1] - parts[i, j]), streams
            )
            # A window of a part: its share of the stream's window (of a part its stream held
            # none of, an even share of the sources').
            share = part.length / max(1, lengths[j]) if part.length else 1 / sources
            target = window * chunk * share
            key = int(keys[j * sources + i])
            reads.append(part.read(int(done[i]), int(need[i]), target, key, chunk * share))
        found.append(MixedStream(j, (lo, hi), final, tuple(reads), rest))
    share = int(sum(hi - lo for lo, hi in slices))
    return MixedPlan(chunk, tuple(found), max(0, full - start_step), share, partial)


def _tags(
    sequence: EpochSequence,
    parts: np.ndarray,
    lengths: np.ndarray,
    chunk: int,
    segments: Sequence[Segment],
) -> list[np.ndarray]:
    """The source each position of each stream takes (its next record), segment by segment:
    the epoch's start shares each stream's positions as its `parts` ([sources, streams + 1]);
    a segment from step `s` shares the records from `s` on among the streams by its quotas
    (`mixing.taken`) the same way. Each stream's tags are permuted, so that a step's count of
    each source spreads as a random sample's."""
    streams, sources = len(lengths), len(sequence.units)
    dtype = np.int16 if sources < 2**15 else np.int32
    tags = [np.zeros(int(n), dtype) for n in lengths]
    every = [(0, sequence.weights), *segments]
    key = [sequence.seed, (_TAG_KEY << 24) ^ sequence.epoch]
    for k, (first, weights) in enumerate(every):
        if k + 1 < len(every) and every[k + 1][0] <= first:
            continue  # changed again at the same step
        if k == 0:
            counts = np.diff(parts, axis=1)
        else:  # without weights: by records, as a list of datasets is read
            left = np.maximum(lengths - first * chunk, 0)  # each stream's positions from `first`
            quota = apportion(int(left.sum()), sequence.records if weights is None else weights)
            done = np.stack([np.bincount(t[: first * chunk], minlength=sources) for t in tags], 1)
            counts = _going_on(sequence, parts, done, quota, left)
        for j in range(streams):
            mine = counts[:, j]
            rng = np.random.Generator(np.random.Philox(key=key, counter=[0, 0, j, k]))
            tags[j][first * chunk :] = rng.permutation(
                np.repeat(np.arange(sources, dtype=dtype), mine)
            )
    return tags


def _going_on(
    sequence: EpochSequence,
    parts: np.ndarray,
    done: np.ndarray,
    quota: np.ndarray,
    left: np.ndarray,
) -> np.ndarray:
    """Each stream's count of each source (`[sources, streams]`) from a weight change on: the
    streams' `left` positions shared so that source `i` gets `quota[i]` in all, each stream
    going on in its part's runs from its `done` records, and no stream reading a pass of a
    source (its next pass, or the one after) while another leaves records of an earlier pass
    unread, nor stopping short of the pass its source ends in (`mixing.allot` with those
    bounds). A source read as one run per stream (fewer records than streams, or up-sampled
    past `_LANE_PASSES`) has no such bounds. Where the steps before have read too far for them
    (a stream already into a source's next pass as the change comes), the bounds of the
    sources furthest from them are let go, one at a time, until counts exist (at last:
    shared by `mixing.taken`, as the epoch's start is)."""
    streams = done.shape[1]
    low = np.zeros_like(done)
    high = np.broadcast_to(left, done.shape).copy()
    for i, records in enumerate(int(n) for n in sequence.records):
        if not _by_pass(records, int(sequence.quotas[i]), streams):
            continue
        end = int(done[i].sum()) + int(quota[i])  # the source's records read by the epoch's end
        last = max(0, -(-end // records) - 1)  # the pass that ends in
        for j in range(streams):
            part = _Part(sequence, i, j, int(parts[i, j]), int(parts[i, j + 1] - parts[i, j]),
                         streams)  # fmt: skip
            before, through = part.before(last * records), part.before((last + 1) * records)
            low[i, j] = max(0, before - int(done[i, j]))
            high[i, j] = max(low[i, j], through - int(done[i, j]))
    shared = np.diff(taken(quota, np.concatenate([[0], np.cumsum(left)])), axis=1)
    # How far sharing by `taken` would fall outside each source's bounds: the furthest first.
    outside = (np.maximum(low - shared, 0) + np.maximum(shared - high, 0)).sum(axis=1)
    for i in [None, *np.argsort(-outside, kind="stable")]:
        if i is not None:
            if not outside[i] and not (low[i].any() or (high[i] < left).any()):
                continue  # no bounds to let go
            low[i], high[i] = 0, left
        counts = allot(left, quota, low, high)
        if counts is not None:
            return counts
    return shared


def _by_pass(records: int, quota: int, streams: int) -> bool:
    """Whether a source's parts are read pass by pass, each stream a share of each pass."""
    return records >= streams and -(-quota // records) <= _LANE_PASSES


@dataclasses.dataclass(frozen=True)
class _Part:
    """Stream `stream`'s part of source `source`: `length` records of the source's own
    sequence from `base` on (its share of the epoch's start); read further, its share of the
    rest of that pass (from the source's quota on), then its share of each next pass: each cut
    among the `streams` in even runs, so that streams reading on in step take this pass's
    records before the next's."""

    sequence: EpochSequence
    source: int
    stream: int
    base: int
    length: int
    streams: int

    def runs(self) -> Iterator[tuple[int, int]]:
        """Its runs of the source's own sequence, in order: (first position, records)."""
        records, quota = (
            int(self.sequence.records[self.source]),
            int(self.sequence.quotas[self.source]),
        )
        passes = -(-quota // records) if records else 1
        if passes > 1 and _by_pass(records, quota, self.streams):
            # A part of a quota over several passes: the stream's share of each pass in turn,
            # so that all streams finish a pass at about the same step.
            cuts = [records] * (passes - 1) + [quota - (passes - 1) * records]
            lo, hi = taken(cuts, self.base), taken(cuts, self.base + self.length)
            for p in range(passes):
                yield p * records + int(lo[p]), int(hi[p] - lo[p])
        else:
            yield self.base, self.length
        if not records:
            return
        end = -(-quota // records) * records  # the end of the pass the quota ends in
        j, n = self.stream, self.streams
        yield quota + (end - quota) * j // n, (end - quota) * (j + 1) // n - (end - quota) * j // n
        share = records * (j + 1) // n - records * j // n
        first = records * j // n if share else 0  # (a source of fewer records than streams)
        turn = end // records
        while True:
            yield turn * records + first, share or records
            turn += 1

    def before(self, position: int) -> int:
        """Its records before `position` of the source's own sequence (its runs rise)."""
        count = 0
        for own, length in self.runs():
            if own >= position:
                return count
            count += min(length, position - own)
        raise AssertionError("runs() is endless")

    def read(self, done: int, need: int, target: float, key: int, step: float) -> SourceRead:
        """Its reads of `need` records from record `done` on, in windows of about `target`
        records (each run cut into its own: a window never spans two), the first run's first
        windows ramping up from about a step's records (`step`), doubling (`order.Windows`
        grows its ramp 4x)."""
        if not need:
            return SourceRead((), (), 0, 0, 0, key)
        sizes: list[int] = []
        at = index = 0
        first = lo = -1
        for run, (_, length) in enumerate(self.runs()):
            for size in _ramped(length, target, step) if run == 0 else _even(length, target):
                if at + size > done:  # a window that holds a record read
                    if first < 0:
                        first, lo = index, at
                    sizes.append(size)
                at, index = at + size, index + 1
                if at >= done + need:
                    return SourceRead(
                        tuple(self.pieces(lo, at)), tuple(sizes), first, done - lo, need, key
                    )
        raise AssertionError("a source with records reads on without end")  # runs() is endless

    def pieces(self, lo: int, hi: int) -> list[Piece]:
        """Records [lo, hi) of the part (its runs end to end), as pieces of units."""
        found: list[Piece] = []
        at = 0
        for own, length in self.runs():
            if at >= hi:
                break
            a, b = max(lo, at), min(hi, at + length)
            if a < b:
                found += self.sequence.pieces(self.source, own + a - at, own + b - at)
            at += length
        return found


def _ramped(length: int, target: float, step: float) -> tuple[int, ...]:
    """`length` records cut into windows of about `step`, twice that, ... while under `target`,
    then the rest as `_even` cuts it."""
    sizes, size = [], max(1, round(step))
    while size < target and length:
        sizes.append(min(size, length))
        length, size = length - sizes[-1], size * 2
    return (*sizes, *_even(length, target))


def _even(length: int, target: float) -> tuple[int, ...]:
    """`length` records cut into windows of about `target` (at least one), as even as can be."""
    if not length:
        return ()
    count = max(1, -(-length // max(1, int(target))))
    return tuple(length * (m + 1) // count - length * m // count for m in range(count))
