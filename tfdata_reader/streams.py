"""A shuffled dataset's records in the epoch order of `order`, as this input pipeline's part of
each global step.

Per epoch, a NumPy function plans the reads (`order.epoch_plan`: which records of which shards
each stream gives this pipeline). Each stream this pipeline takes a part of is read as a chain
of count-checked record ranges (seeking to the shard's nearest seek point, then skipping), in
windows of whole steps, each permuted in one op (`stateless_shuffle`, keyed by the stream and
the window's index, so that every pipeline and a resumed reader permute alike). The streams'
records then move in groups of whole steps, one group of each stream side by side, and one
reshape lays them out step by step, each step's chunks in stream order, cut to this pipeline's
part: tf.data moves about a thousand records an element, never a chunk or a record. The final,
partial step follows, and `rebatch` makes the replicas' batches. No shuffle buffer is needed:
the records were shuffled when written.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from tfdata_reader.history import WeightHistory, Weights, going_on
from tfdata_reader.manifest import Compression, ShardInfo
from tfdata_reader.mixed import MixedPlan, mixed_plan
from tfdata_reader.mixed_streams import mixed_rows, mixed_tables
from tfdata_reader.options import ReadOptions
from tfdata_reader.order import EpochPlan, Sharing, epoch_plan, epoch_steps
from tfdata_reader.records import BlockReading, checked_blocks
from tfdata_reader.sequence import EpochSequence, Piece

__all__ = [
    "EpochCounter",
    "ShuffledReads",
    "epoch_ordered",
    "epochs_from",
    "record_bytes",
    "records_per_pipeline_epoch",
    "shuffled_records",
]

# The plan's tables as tf.data reads them, column by column: a row a stream this pipeline takes
# full steps of, and a row a piece of a shard to read.
_STREAM_COLUMNS = ("first_piece", "end_piece", "skip_steps", "first_window", "window_key")
_PIECE_COLUMNS = ("shard", "start", "stop", "seek_record", "seek_offset", "shard_records")
_BLOCK = 1024  # records a stream's reader hands on at once (fewer elements: faster)
_GROUP = 1024  # records of a stream moved as one element between reading and steps


class EpochCounter(tf.Module):
    """The next epoch and step to read, as int64 variables that a checkpoint can hold."""

    def __init__(self, epoch: int = 0, step: int = 0, name: str | None = None) -> None:
        super().__init__(name=name)
        with tf.init_scope():
            self.epoch = tf.Variable(epoch, dtype=tf.int64, trainable=False, name="epoch")
            self.step = tf.Variable(step, dtype=tf.int64, trainable=False, name="step")


@dataclasses.dataclass(frozen=True)
class ShuffledReads:
    """What `shuffled_records` needs besides the plan's numbers.

    Attributes:
      paths: every shard's full path, in manifest order.
      shards: the manifest's shards (records, seek points), in the same order.
      compression: the shards'.
      seed: the order's seed.
      sharing: the global batch, streams and pipelines.
      window: the steps of each stream permuted together (`order.window_steps`).
      sources: each source's shards, one after another (None: one source of every shard).
      weights: each source's weight (None: every record once an epoch).
      names: each source's datasets (`partitions.Sources.names`; one dataset: its own).
    """

    paths: tuple[str, ...]
    shards: tuple[ShardInfo, ...]
    compression: Compression
    seed: int
    sharing: Sharing
    window: int = 1
    sources: tuple[int, ...] | None = None
    weights: tuple[float, ...] | None = None
    names: tuple[str, ...] = ()

    @property
    def source_count(self) -> int:
        return 1 if self.sources is None else len(self.sources)

    @functools.cached_property
    def source_units(self) -> tuple[tuple[int, ...], ...]:
        """Each source's units' record counts (units in order, source after source)."""
        sizes = self.sources if self.sources is not None else (len(self.shards),)
        ends = np.cumsum(sizes).tolist()
        found: list[list[int]] = [[] for _ in sizes]
        for index, lo, hi in self.units:
            found[int(np.searchsorted(ends, index, side="right"))].append(hi - lo)
        return tuple(tuple(own) for own in found)

    @functools.cached_property
    def units(self) -> list[tuple[int, int, int]]:
        """What an epoch's order permutes, as (shard, first record, end record): a plain
        shard's stretches between its seek points (about 4 MiB each, each read from its
        start), so that streams hop between far places of the data, several datasets read as
        one included; a GZIP shard whole (reading from a seek point decompresses all before)."""
        found = []
        for index, shard in enumerate(self.shards):
            cuts = [0] if self.compression.tf_name else [0, *(r for r, _ in shard.seek)]
            found += [
                (index, lo, hi) for lo, hi in zip(cuts, [*cuts[1:], shard.records], strict=True)
            ]
        return found

    def segments(
        self, epoch: int, history: WeightHistory | None = None
    ) -> tuple[tuple[int, Weights], ...]:
        """The weights `epoch` is read with from each step on (the first: from step 0): the
        history's, of its epoch, else these."""
        if history is not None and history.epoch == epoch:
            return history.segments
        return ((0, self.weights),)

    def plan(
        self, epoch: int, start_step: int, history: WeightHistory | None = None
    ) -> EpochPlan | MixedPlan:
        (_, weights), *segments = self.segments(epoch, history)
        sequence = EpochSequence(self.source_units, self.seed, epoch, weights)
        if self.source_count == 1:
            return epoch_plan(sequence, self.sharing, start_step=start_step, window=self.window)
        return mixed_plan(
            sequence, self.sharing, start_step=start_step, window=self.window, segments=segments
        )

    def history(self, epoch: int, step: int, before: str) -> str:
        """The weight history (JSON) once this dataset reads on from (epoch, step) after
        `before` (`WeightHistory.reading`: other datasets within an epoch are refused)."""
        return going_on(before, epoch, step, self.names, self.weights).to_json()

    def tables(
        self, epoch: int, start_step: int, history: WeightHistory | None = None
    ) -> tuple[np.ndarray, ...]:
        """The epoch's plan as int64 tables: one row a stream whose full steps this pipeline
        takes (`_STREAM_COLUMNS`), one row a piece (theirs, then every final piece), and where
        this pipeline's part of a step starts in their chunks side by side, and where the
        final pieces start (several sources: `mixed_streams.mixed_tables`)."""
        plan = self.plan(epoch, start_step, history)
        if isinstance(plan, MixedPlan):
            return mixed_tables(plan, self._piece_row, self.group_steps)
        taken = [read for read in plan.streams if read.full_slice[1] > read.full_slice[0]]
        streams = np.zeros((len(taken), len(_STREAM_COLUMNS)), np.int64)
        rows: list[tuple[int, ...]] = []
        for k, read in enumerate(taken):
            first = len(rows)
            rows += [self._piece_row(p) for p in read.full_pieces]
            streams[k] = (first, len(rows), read.skip_steps, read.first_window, read.window_key)
        finals = len(rows)
        rows += [self._piece_row(p) for read in plan.streams for p in read.final_pieces]
        pieces = np.array(rows, np.int64).reshape(len(rows), len(_PIECE_COLUMNS))
        offset = taken[0].full_slice[0] if taken else 0
        windows = np.array(plan.window_records or (plan.chunk,), np.int64)
        return streams, pieces, np.array([offset, finals], np.int64), windows

    @property
    def group_steps(self) -> int:
        """Whole steps of a stream moved as one element between reading and steps."""
        return max(1, _GROUP // self.sharing.chunk)

    def _piece_row(self, piece: Piece) -> tuple[int, ...]:
        """A piece of a unit as the records of its shard to read, and where from."""
        index, first, _ = self.units[piece.shard]
        shard = self.shards[index]
        start, stop = first + piece.start, first + piece.stop
        seek_record, seek_offset = shard.seek_point(start)
        return index, start, stop, seek_record, seek_offset, shard.records


def records_per_pipeline_epoch(reads: ShuffledReads, start_step: int) -> tuple[int, int, int]:
    """(full steps, this pipeline's records of a full step, of the final step) of an epoch
    read from `start_step` (the same for every epoch)."""
    plan = reads.plan(0, start_step)
    return plan.full_steps, plan.share, plan.final_records


def record_bytes(shards: Sequence[ShardInfo]) -> float:
    """About how many bytes a record takes in memory: the framed bytes before the shards' last
    seek points (a GZIP shard's after decompression), else the stored bytes."""
    framed = [s.seek[-1] for s in shards if s.seek]
    if framed:
        return sum(offset for _, offset in framed) / sum(record for record, _ in framed)
    return sum(s.bytes for s in shards) / max(1, sum(s.records for s in shards))


def shuffled_records(
    reads: ShuffledReads,
    epochs: tf.data.Dataset,
    num_parallel_calls: int,
    batch_size: int,
) -> tf.data.Dataset:
    """Batches of `batch_size` records (string vectors): this pipeline's part of each global
    step, step after step, for each (epoch, start step) that `epochs` yields. Epochs are
    batched apart, so that an epoch's final, partial step is its own batch."""
    paths = tf.constant(list(reads.paths), tf.string)
    chunk = reads.sharing.global_batch // reads.sharing.streams
    window = reads.window * chunk
    sources = reads.source_count
    # A read buffer per stream and source open at once: 64 MiB in all, 256 KiB to 8 MiB each.
    buffer = max(256 << 10, min(8 << 20, (64 << 20) // (reads.sharing.streams * sources)))
    reading = BlockReading(reads.compression.tf_name, max(chunk, min(window, _BLOCK)), buffer)
    share = reads.sharing.global_batch // reads.sharing.num_pipelines
    group = reads.group_steps * chunk  # whole steps of a stream
    per_batch = batch_size if share % batch_size == 0 else share  # full steps' elements

    def tables(epoch: np.int64, step: np.int64, history: bytes) -> tuple[np.ndarray, ...]:
        return reads.tables(int(epoch), int(step), WeightHistory.from_json(history.decode()))

    def read_piece(row: dict[str, tf.Tensor]) -> tf.data.Dataset:
        return checked_blocks(
            tf.gather(paths, row["shard"]),
            row["start"],
            row["stop"],
            row["shard_records"],
            reading,
            seek=(row["seek_record"], row["seek_offset"]),
        )

    def pieces_of(table: tf.Tensor, first: tf.Tensor, end: tf.Tensor) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices(
            _named(table[first:end], _PIECE_COLUMNS)
        ).flat_map(read_piece)

    def epoch_records(position: tf.Tensor, history: tf.Tensor) -> tf.data.Dataset:
        if sources > 1:
            mixed = tf.numpy_function(
                tables, [position[0], position[1], history], [tf.int64] * 8, stateful=False
            )
            rows = mixed_rows(
                mixed, reads.sharing, sources, num_parallel_calls, pieces_of, _permuter
            )
            return rows.rebatch(batch_size, drop_remainder=reads.sharing.drop_remainder)
        streams, pieces, where, windows = tf.numpy_function(
            tables, [position[0], position[1], history], [tf.int64] * 4, stateful=False
        )
        streams = tf.reshape(streams, [-1, len(_STREAM_COLUMNS)])
        pieces = tf.reshape(pieces, [-1, len(_PIECE_COLUMNS)])
        taken = tf.shape(streams, out_type=tf.int64)[0]

        def stream(k: tf.Tensor) -> tf.data.Dataset:
            """A stream's records from its start step on, its windows permuted, in groups of
            whole steps."""
            row = _named(streams[k], _STREAM_COLUMNS)
            records = pieces_of(pieces, row["first_piece"], row["end_piece"])
            permute = _permuter(row["window_key"], row["first_window"], row["skip_steps"] * chunk)
            windowed = records.rebatch(tf.reshape(windows, [-1])).enumerate()
            return windowed.map(permute).rebatch(group)

        def steps_of(groups: tf.Tensor) -> tf.Tensor:
            """The streams' groups side by side -> the batches of their steps: each step the
            streams' chunks of it in stream order, cut to this pipeline's part (one slice for
            all streams: the part is contiguous in stream order), in batches (a part is whole
            batches: no rebatch, one copy less)."""
            chunks = tf.reshape(groups, [taken, -1, chunk])
            rows = tf.reshape(tf.transpose(chunks, [1, 0, 2]), [-1, taken * chunk])
            return tf.reshape(rows[:, where[0] : where[0] + share], [-1, per_batch])

        full = (
            tf.data.Dataset.range(taken)
            .interleave(
                stream,
                cycle_length=reads.sharing.streams,
                block_length=1,
                num_parallel_calls=num_parallel_calls,
                deterministic=True,
            )
            .batch(tf.maximum(taken, 1))
            .map(steps_of)
            .unbatch()
        )
        final = pieces_of(pieces, where[1], tf.shape(pieces, out_type=tf.int64)[0])
        if per_batch != batch_size:  # a part of a step that is not whole batches
            return full.concatenate(final.rebatch(share)).rebatch(
                batch_size, drop_remainder=reads.sharing.drop_remainder
            )
        return full.concatenate(
            final.rebatch(batch_size, drop_remainder=reads.sharing.drop_remainder)
        )

    return epochs.flat_map(epoch_records)


def _named(table: tf.Tensor, columns: Sequence[str]) -> dict[str, tf.Tensor]:
    """A plan table's (or row's) columns by name: its last axis unstacked."""
    return dict(zip(columns, tf.unstack(table, num=len(columns), axis=-1), strict=True))


def _permuter(
    key: tf.Tensor, first: tf.Tensor, skip: tf.Tensor
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """A stream's windows (enumerated from its first read) permuted, each by the stream's key
    and its index in the epoch (the same on every pipeline, and on resuming), the first less
    its `skip` records (the steps before the start step)."""

    def permute(index: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
        seed = tf.stack([key, first + index])
        # The positions permuted, then one gather of the strings: half the time of shuffling
        # the strings themselves, and the skip costs no copy of its own.
        order = tf.random.experimental.stateless_shuffle(
            tf.range(tf.shape(records, out_type=tf.int64)[0]), seed=seed
        )
        return tf.gather(records, order[tf.where(tf.equal(index, 0), skip, 0) :])

    return permute


def _check_position(epoch: int, step: int, steps: int, of_epoch: str) -> None:
    if epoch < 0 or not 0 <= step < steps:
        raise ValueError(
            f"the position (epoch {epoch}, step {step}) is outside the dataset: an epoch has "
            f"steps 0..{steps - 1} {of_epoch}, and epochs count from 0"
        )


def epochs_from(
    counter: EpochCounter,
    num_epochs: int | None,
    advance: bool,
    steps: tuple[int, str] | None = None,
    history: Callable[[int, int, str], str] | None = None,
) -> tf.data.Dataset:
    """((epoch, start step), weight history) of one iteration: from the counter's epoch and
    step, read when the iteration starts, then the next epochs from step 0. With `advance` (a
    counter of the reader's own) each iteration moves the counter past the epochs it reads, so
    that iterating again (Keras, each epoch) reads the next ones; otherwise the training loop
    moves it (`ReadPosition`). `steps`: an epoch's steps and what they are of, to check a
    counter that was moved after the dataset was made (a one-line error, not one from deep in
    the plan). `history`: how a `ReadPosition`'s weight history goes on from (epoch, step)
    (`ShuffledReads.history`), noted in it when the iteration starts (so that a position
    restored after the dataset was made counts too); "" without."""
    count = np.iinfo(np.int64).max if num_epochs is None else num_epochs

    def checked(epoch: tf.Tensor, step: tf.Tensor) -> list[tf.Operation]:
        if steps is None:
            return []
        inside = tf.logical_and(
            tf.greater_equal(epoch, 0),
            tf.logical_and(tf.greater_equal(step, 0), tf.less(step, steps[0])),
        )
        text = tf.strings.format(
            "the position (epoch {}, step {}) is outside the dataset: an epoch has steps "
            f"0..{steps[0] - 1} {steps[1]}, and epochs count from 0",
            [epoch, step],
        )
        return [tf.raw_ops.Assert(condition=inside, data=[text], summarize=1)]

    def noted(epoch: tf.Tensor, step: tf.Tensor) -> tf.Tensor:
        weights = getattr(counter, "weights", None)
        if history is None or weights is None:
            return tf.constant("")

        def going_on(e: np.int64, s: np.int64, before: bytes) -> bytes:
            return history(int(e), int(s), before.decode("utf-8")).encode("utf-8")

        found = tf.numpy_function(going_on, [epoch, step, weights.read_value()], tf.string)
        found = tf.reshape(found, [])
        with tf.control_dependencies([weights.assign(found)]):
            return tf.identity(found)

    def start(_: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        epoch, step = counter.epoch.read_value(), counter.step.read_value()
        with tf.control_dependencies(checked(epoch, step)):
            epoch, step = tf.identity(epoch), tf.identity(step)
        noted_history = noted(epoch, step)
        if not (advance and num_epochs is not None):
            return tf.stack([epoch, step]), noted_history
        with tf.control_dependencies([epoch, step]):  # the next iteration: the next epochs
            moved = [counter.epoch.assign_add(num_epochs), counter.step.assign(0)]
        with tf.control_dependencies(moved):
            return tf.stack([tf.identity(epoch), tf.identity(step)]), noted_history

    def epochs(first: tf.Tensor, noted_history: tf.Tensor) -> tf.data.Dataset:
        zero = tf.constant(0, tf.int64)
        return tf.data.Dataset.range(count).map(
            lambda k: (tf.stack([first[0] + k, tf.where(k == 0, first[1], zero)]), noted_history)
        )

    return tf.data.Dataset.from_tensors(0).map(start).flat_map(epochs)


def epoch_ordered(
    reads: ShuffledReads,
    batch_size: int,
    options: ReadOptions,
    position: EpochCounter | None,
) -> tuple[tf.data.Dataset, int | None]:
    """This pipeline's batches of string vectors in the epoch order, and how many an iteration
    gives (None: not known, as when resuming from a position or a start step).

    Each iteration starts at `position` (which the training loop moves on), else at the
    options' start epoch and step and then at the epochs after those it read.
    """
    total = sum(s.records for s in reads.shards)
    steps = epoch_steps(total, reads.sharing.global_batch, reads.sharing.drop_remainder)
    of_epoch = f"({total} records, global batch {reads.sharing.global_batch})"
    if steps == 0:  # only with drop_remainder: every epoch would be empty, read forever
        raise ValueError(
            f"an epoch has no step: {total} records are fewer than a global batch {of_epoch[1:-1]}"
            " and drop_remainder drops them; use a smaller batch or drop_remainder=False"
        )
    if position is not None and (options.start_epoch or options.start_step):
        raise ValueError(
            "give a position= or start_epoch/start_step, not both: the position says where "
            "each iteration starts"
        )
    if options.start_step >= steps:
        raise ValueError(
            f"start_step {options.start_step} is past the epoch's last step: its steps are "
            f"0..{steps - 1} {of_epoch}; start the next epoch at step 0 instead"
        )
    if position is not None:
        _check_position(int(position.epoch.numpy()), int(position.step.numpy()), steps, of_epoch)
        if hasattr(position, "steps_per_epoch"):
            position.steps_per_epoch = steps
        counter, advance = position, False
    else:
        counter, advance = EpochCounter(options.start_epoch, options.start_step), True
    epochs = epochs_from(counter, options.num_epochs, advance, (steps, of_epoch), reads.history)
    ds = shuffled_records(reads, epochs, options.num_parallel_calls, batch_size).prefetch(
        tf.data.AUTOTUNE
    )
    if position is not None or options.start_step or options.num_epochs is None:
        return ds, None if options.num_epochs is not None else tf.data.INFINITE_CARDINALITY
    full_steps, share, final = records_per_pipeline_epoch(reads, 0)
    per_epoch = full_steps * (share // batch_size) + -(-final // batch_size)
    return ds, per_epoch * options.num_epochs
