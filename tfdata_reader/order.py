"""The order an epoch reads a shuffled dataset in: pure arithmetic on the shards' record counts,
the same for any number of input pipelines.

A dataset converted in shuffled order (the default) holds its records in a seeded random order
across all shards, so any run of consecutive records is a random sample. An epoch then only
has to vary where batches cut that order, and share it among input pipelines:

1. the epoch's sequence (`sequence.EpochSequence`): each source's units (shards, or
   stretches of them: `streams.ShuffledReads.units`) in an order drawn from the seed and the
   epoch, end to end, rotated by a number of records drawn the same way (so that even one
   shard is cut differently each epoch) (several sources: `mixed`);
2. the sequence is cut into `streams` equal contiguous streams, and each stream is rotated by
   a number of records of its own (so that records at the same place of shards of one size
   do not meet again each epoch);
3. each stream is read in *windows* of `window_steps` steps' records (memory decides how
   many: `window_steps`), and each window is permuted (seeded by the stream's key and the
   window's index): records that sat side by side in a shard share a step with chance about
   1 / `window_steps`, so batches are drawn anew each epoch. An epoch's first windows ramp up,
   1, 4, 16, ... steps (`Windows`): its first batches wait for a step's records, not a window's;
4. global step `s` takes the records `[s*c, (s+1)*c)` of every stream's permuted windows
   (`c = global_batch / streams`), stream after stream: a step is a fixed set of records
   whatever the number of pipelines;
5. input pipeline `i` of `n` takes the part `[i*G/n, (i+1)*G/n)` of every step (in that stream
   order), so with `n` dividing `streams` it reads whole streams and nothing else; the last,
   partial step is shared out evenly.

Resuming from global step `s` of an epoch reads every stream from the start of the window
that holds step `s` and leaves out the steps before it: a state of two numbers (epoch, step),
valid on any number of pipelines. Draws use NumPy's Philox bit stream
(raw 64-bit words, stable across NumPy versions), keyed by the seed and the epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from tfdata_reader.sequence import EpochSequence, Piece, draws

__all__ = [
    "MAX_STREAMS",
    "MIN_CHUNK",
    "EpochPlan",
    "Sharing",
    "StreamRead",
    "Windows",
    "epoch_plan",
    "epoch_steps",
    "stream_count",
    "window_steps",
]

MAX_STREAMS = 64
MIN_CHUNK = 32  # records a stream gives a step, at least (tf.data moves them as one element)
_STREAM_KEY = 0x737472  # "str": each stream's rotation and window key


def stream_count(global_batch: int, limit: int = MAX_STREAMS, min_chunk: int = MIN_CHUNK) -> int:
    """The streams an epoch is cut into: the largest divisor of `global_batch` that is at most
    `limit` and leaves each stream at least `min_chunk` records a step (1 for small batches).

    A batch of 256 gives 8 streams of 32 records; 1,024 gives 32; 96 gives 3. Any number of
    input pipelines that divides it reads whole streams; others read parts of some.
    """
    if global_batch < 1:
        raise ValueError(f"global_batch must be at least 1, got {global_batch}")
    best = 1
    for p in range(1, min(limit, global_batch // min_chunk) + 1):
        if global_batch % p == 0:
            best = p
    return best


def window_steps(global_batch: int, record_bytes: float, budget_bytes: int, steps: int) -> int:
    """The steps of a window (`budget_bytes`: what all streams' windows may hold at once, of
    records of about `record_bytes`): as many as fit, at least 1, at most the epoch's
    `steps` (a window of every step permutes each stream whole)."""
    fit = int(budget_bytes // max(1.0, global_batch * record_bytes))
    return max(1, min(fit, steps))


@dataclasses.dataclass(frozen=True)
class Windows:
    """An epoch's windows, in steps: a ramp of 1, 4, 16, ... steps (each less than `steps`),
    then `steps` each. A window is read whole before its first step comes out; with windows of
    most of an epoch (a small dataset, a large `reshuffle_bytes`), the ramp lets the first
    steps of an epoch come after a step's records are read rather than most of the epoch's.
    (Small windows mix less: growing 4x, the ramp's few windows leave batch-mates meeting
    again about as often as without it; growing 2x, 1.2-1.3x as often.)"""

    steps: int
    growth: int = 4

    @property
    def ramp(self) -> tuple[int, ...]:
        """The ramp's windows' steps."""
        sizes, size = [], 1
        while size < self.steps:
            sizes.append(size)
            size *= self.growth
        return tuple(sizes)

    def start(self, index: int) -> int:
        """The first step of window `index`."""
        ramp = self.ramp
        if index <= len(ramp):
            return sum(ramp[:index])
        return sum(ramp) + (index - len(ramp)) * self.steps

    def index(self, step: int) -> int:
        """The window that holds `step`."""
        at = 0
        for k, size in enumerate(self.ramp):
            if step < at + size:
                return k
            at += size
        return len(self.ramp) + (step - at) // max(1, self.steps)

    def sizes(self, first: int, end: int) -> list[int]:
        """The steps of windows `first`, `first + 1`, ... up to step `end` (the last cut
        there)."""
        found, k = [], first
        while (at := self.start(k)) < end:
            found.append(min(self.start(k + 1), end) - at)
            k += 1
        return found


def _stream_draws(seed: int, epoch: int, lengths: Sequence[int]) -> list[tuple[int, int]]:
    """Each stream's (rotation in [0, its length), window key in [0, 2**63))."""
    words = draws(seed, epoch, 2 * len(lengths), _STREAM_KEY)
    return [
        (int(words[2 * j] % np.uint64(n)) if n else 0, int(words[2 * j + 1] >> np.uint64(1)))
        for j, n in enumerate(lengths)
    ]


@dataclasses.dataclass(frozen=True)
class _Stream:
    """A stream: its first position in the epoch's sequence, its length, its own rotation."""

    base: int
    length: int
    shift: int

    def ranges(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Its positions [lo, hi) (rotated) as ranges of the epoch's sequence: one, or two."""
        a, b, n = lo + self.shift, hi + self.shift, self.length
        found = [(a, min(b, n)), (max(a, n) - n, b - n)]
        return [(self.base + u0, self.base + u1) for u0, u1 in found if u1 > u0]

    def pieces(self, sequence: EpochSequence, lo: int, hi: int) -> list[Piece]:
        """Its records [lo, hi) (of a sequence of one source), as pieces of units."""
        return [p for v0, v1 in self.ranges(lo, hi) for p in sequence.pieces(0, v0, v1)]


@dataclasses.dataclass(frozen=True)
class StreamRead:
    """What one input pipeline reads of one stream in an epoch.

    Attributes:
      stream: the stream's index.
      full_steps: the full steps read (from the start step), each a chunk of `chunk` records.
      full_slice: the part [lo, hi) of each full step's chunk this pipeline takes (lo == hi:
        none; the chunks are then not read, and count as empty).
      full_pieces: the records of the windows that hold those steps, from the start of the
        start step's window, in order (empty when none are taken).
      final_pieces: the records this pipeline takes of the final, partial step (may be none).
      has_final: whether the epoch has a final, partial step (each stream then gives one
        element more, empty when `final_pieces` is).
      skip_steps: the steps of the first window before the start step (read, permuted with
        the window, and left out).
      first_window: the index of the first window read (the windows of an epoch count from 0).
      window_key: the key of this stream's window permutations (with each window's index).
    """

    stream: int
    full_steps: int
    full_slice: tuple[int, int]
    full_pieces: tuple[Piece, ...]
    final_pieces: tuple[Piece, ...]
    has_final: bool
    skip_steps: int = 0
    first_window: int = 0
    window_key: int = 0

    @property
    def final_records(self) -> int:
        return sum(p.stop - p.start for p in self.final_pieces)


@dataclasses.dataclass(frozen=True)
class EpochPlan:
    """One input pipeline's reads of one epoch, from `start_step` on."""

    chunk: int  # records a stream gives a full step
    streams: tuple[StreamRead, ...]  # those this pipeline reads anything of, in stream order
    full_steps: int  # full steps read
    share: int  # records this pipeline takes of each full step
    final_records: int  # records it takes of the final, partial step (0: none)
    windows: tuple[int, ...] = ()  # each window's steps, from the first read (`Windows`)

    @property
    def records(self) -> int:
        return self.full_steps * self.share + self.final_records

    @property
    def window_records(self) -> tuple[int, ...]:
        """Each window's records of a stream, from the first read."""
        return tuple(steps * self.chunk for steps in self.windows)


def epoch_steps(total: int, global_batch: int, drop_remainder: bool = False) -> int:
    """Global steps of an epoch of `total` records."""
    return total // global_batch if drop_remainder else -(-total // global_batch)


@dataclasses.dataclass(frozen=True)
class Sharing:
    """How the steps of an epoch are shared out.

    Attributes:
      global_batch: records per global step (all replicas of all pipelines).
      streams: what `stream_count(global_batch)` gives (a divisor of `global_batch`).
      num_pipelines: input pipelines sharing each step (a divisor of `global_batch`).
      pipeline: this pipeline, in [0, num_pipelines).
      drop_remainder: leave out the final, partial step.
    """

    global_batch: int
    streams: int
    num_pipelines: int = 1
    pipeline: int = 0
    drop_remainder: bool = False

    @property
    def chunk(self) -> int:
        """Records a stream gives a full step."""
        return self.global_batch // self.streams

    def slices(self) -> list[tuple[int, int]]:
        """This pipeline's part [lo, hi) of each stream's chunk of a full step (its part of the
        step, streams in order; lo == hi: none)."""
        share = self.global_batch // self.num_pipelines
        lo, hi = self.pipeline * share, (self.pipeline + 1) * share
        c = self.chunk
        return [
            (min(max(lo - j * c, 0), c), min(max(hi - j * c, 0), c)) for j in range(self.streams)
        ]

    def bounds(self, total: int) -> list[int]:
        """Where each stream starts in an epoch of `total` records, and the end: equal
        contiguous cuts."""
        return [total * j // self.streams for j in range(self.streams + 1)]

    def steps(self, total: int, start_step: int) -> tuple[int, bool]:
        """An epoch of `total` records: its full steps, and whether a final, partial step is
        read from `start_step` on.

        Raises:
          ValueError: for a start step past the epoch's end.
        """
        full = total // self.global_batch
        partial = not self.drop_remainder and total % self.global_batch > 0
        if start_step < 0 or start_step > full + partial:
            raise ValueError(
                f"start_step {start_step} is past the epoch's {full + partial} steps "
                f"({total} records, global batch {self.global_batch})"
            )
        return full, partial and start_step <= full

    def __post_init__(self) -> None:
        if self.global_batch % self.streams or self.global_batch % self.num_pipelines:
            raise ValueError(
                f"global_batch {self.global_batch} must be a multiple of streams "
                f"({self.streams}) and of the input pipelines ({self.num_pipelines})"
            )
        if not 0 <= self.pipeline < self.num_pipelines:
            raise ValueError(f"pipeline must be in [0, {self.num_pipelines}), got {self.pipeline}")


def epoch_plan(
    sequence: EpochSequence,
    sharing: Sharing,
    *,
    start_step: int = 0,
    window: int = 1,
) -> EpochPlan:
    """What one input pipeline reads of an epoch's `sequence` (of one source: several are
    `mixed`), from global step `start_step` on.

    Args:
      sequence: the epoch's sequence of records (its seed and epoch also key the streams'
        rotations and windows).
      sharing: the global batch, streams and pipelines.
      start_step: the first global step to read (resuming).
      window: the steps of a window of each stream, permuted together (`window_steps`).

    Raises:
      ValueError: for a start step past the epoch's end, or several sources.
    """
    if len(sequence.units) != 1:
        raise ValueError(f"epoch_plan reads one source; {len(sequence.units)} are `mixed`")
    global_batch, streams = sharing.global_batch, sharing.streams
    num_pipelines, pipeline = sharing.num_pipelines, sharing.pipeline
    total = sequence.length
    chunk = sharing.chunk
    full, partial = sharing.steps(total, start_step)
    window = max(1, window)
    bounds = sharing.bounds(total)
    lengths = [bounds[j + 1] - bounds[j] for j in range(streams)]
    drawn = _stream_draws(sequence.seed, sequence.epoch, lengths)
    share = global_batch // num_pipelines
    slices = sharing.slices()
    # The final step's records of each stream, and this pipeline's part of them.
    tails = [lengths[j] - full * chunk for j in range(streams)]
    tail_before = np.concatenate([[0], np.cumsum(tails)]).astype(int).tolist()
    tail_total = tail_before[-1] if partial else 0
    t_lo = tail_total * pipeline // num_pipelines
    t_hi = tail_total * (pipeline + 1) // num_pipelines
    full_steps = max(0, full - start_step)
    windows = Windows(window)
    first_window = windows.index(start_step)
    begin = windows.start(first_window)  # the first full step read: its window's first
    reads = []
    for j in range(streams):
        place = _Stream(bounds[j], lengths[j], drawn[j][0])
        s_lo, s_hi = slices[j]
        taken = s_lo < s_hi and full_steps > 0
        full_pieces = place.pieces(sequence, begin * chunk, full * chunk) if taken else []
        f_lo = min(max(t_lo - tail_before[j], 0), tails[j]) if partial else 0
        f_hi = min(max(t_hi - tail_before[j], 0), tails[j]) if partial else 0
        base = full * chunk
        final_pieces = place.pieces(sequence, base + f_lo, base + f_hi)
        if taken or final_pieces:
            reads.append(
                StreamRead(
                    j,
                    full_steps,
                    (s_lo, s_hi) if taken else (0, 0),
                    tuple(full_pieces),
                    tuple(final_pieces),
                    partial,
                    start_step - begin if taken else 0,
                    first_window,
                    drawn[j][1],
                )
            )
    partial_share = (t_hi - t_lo) if partial else 0
    sizes = tuple(windows.sizes(first_window, full)) if full_steps else ()
    return EpochPlan(chunk, tuple(reads), full_steps, share, partial_share, sizes)
