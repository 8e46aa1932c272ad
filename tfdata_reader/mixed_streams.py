"""Several sources' epoch order (`mixed`) as tf.data: this input pipeline's part of each step.

Per stream this pipeline takes a part of, each source's part is read as a chain of
count-checked record ranges, in windows (each permuted in one op, keyed by the part and the
window's index) and then in groups: each group the source's records of a run of whole steps.
The sources' groups are zipped and put in the order of the stream's positions (each position
takes its source's next record: one gather, its index from the plan's tags); the streams'
groups then move side by side and one reshape lays them out step by step, as one source's do
(`streams`). The final, partial step comes last, each stream's records of it padded to a
chunk so that the streams batch together, and cut to this pipeline's part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from tfdata_reader.mixed import MixedPlan
from tfdata_reader.order import Sharing
from tfdata_reader.sequence import Piece

__all__ = ["mixed_rows", "mixed_tables"]

# A row a stream this pipeline takes a part of; a row a (stream, source): its part's reads.
_STREAM_COLUMNS = ("final_lo", "final_hi", "first_tag")
_PART_COLUMNS = (
    "first_piece",
    "end_piece",
    "first_size",
    "end_size",
    "first_window",
    "skip",
    "key",
)
_WHERE = ("offset", "full_groups", "groups")


def mixed_tables(
    plan: MixedPlan, piece_row: Callable[[Piece], tuple[int, ...]], group_steps: int
) -> tuple[np.ndarray, ...]:
    """The plan as int64 tables (`mixed_rows` reads them): streams (`_STREAM_COLUMNS`), parts
    `[streams, sources, _PART_COLUMNS]`, the window sizes, each part's records in each group
    `[streams, sources, groups]`, where each group starts in the stream's tags
    `[streams, groups + 1]`, the tags, the pieces, and `_WHERE`."""
    sources = len(plan.streams[0].sources) if plan.streams else 0
    full_groups = -(-plan.full_steps // group_steps)
    groups = full_groups + plan.has_final
    streams = np.zeros((len(plan.streams), len(_STREAM_COLUMNS)), np.int64)
    parts = np.zeros((len(plan.streams), sources, len(_PART_COLUMNS)), np.int64)
    counts = np.zeros((len(plan.streams), sources, groups), np.int64)
    bounds = np.zeros((len(plan.streams), groups + 1), np.int64)
    sizes: list[int] = []
    rows: list[tuple[int, ...]] = []
    tags: list[np.ndarray] = []
    first_tag = 0
    # Where each full group ends in a stream's positions (the same in every stream).
    cuts = np.minimum(np.arange(full_groups + 1) * group_steps, plan.full_steps) * plan.chunk
    for k, read in enumerate(plan.streams):
        streams[k] = (*read.final_slice, first_tag)
        first_tag += len(read.tags)
        tags.append(read.tags.astype(np.int64))
        bounds[k] = np.concatenate([cuts, [len(read.tags)]]) if plan.has_final else cuts
        group_of = np.searchsorted(bounds[k], np.arange(len(read.tags)), side="right") - 1
        cells = np.bincount(group_of * sources + read.tags, minlength=groups * sources)
        counts[k] = cells.reshape(groups, sources).T
        for i, source in enumerate(read.sources):
            first_piece, first_size = len(rows), len(sizes)
            rows += [piece_row(p) for p in source.pieces]
            sizes += source.windows
            parts[k, i] = (first_piece, len(rows), first_size, len(sizes), source.first_window,
                           source.skip, source.key)  # fmt: skip
    pieces = np.array(rows, np.int64).reshape(len(rows), -1)
    offset = plan.streams[0].full_slice[0] if plan.streams else 0
    every_tag = np.concatenate(tags) if tags else np.zeros(0, np.int64)
    return (
        streams,
        parts,
        np.array([*sizes, 1], np.int64),  # one more: never read, so that no part's is empty
        counts,
        bounds,
        every_tag,
        pieces,
        np.array([offset, full_groups, groups], np.int64),
    )


def mixed_rows(
    tables: Sequence[tf.Tensor],
    sharing: Sharing,
    sources: int,
    num_parallel_calls: int,
    pieces_of: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.data.Dataset],
    permuter: Callable[
        [tf.Tensor, tf.Tensor, tf.Tensor], Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
    ],
) -> tf.data.Dataset:
    """This pipeline's part of each step of an epoch, a row (string vector) a step, from the
    tables of `mixed_tables` (as tf.numpy_function gives them); `pieces_of` reads a span of
    the pieces table, `permuter` permutes a part's windows (`streams`)."""
    chunk, streams = sharing.chunk, sharing.streams
    share = sharing.global_batch // sharing.num_pipelines
    stream_rows, parts, sizes, counts, bounds, tags, pieces, where = tables
    stream_rows = tf.reshape(stream_rows, [-1, len(_STREAM_COLUMNS)])
    taken = tf.shape(stream_rows, out_type=tf.int64)[0]
    parts = tf.reshape(parts, [taken, sources, len(_PART_COLUMNS)])
    where = dict(zip(_WHERE, tf.unstack(tf.reshape(where, [len(_WHERE)])), strict=True))
    counts = tf.reshape(counts, [taken, sources, where["groups"]])
    bounds = tf.reshape(bounds, [taken, where["groups"] + 1])
    tags = tf.reshape(tags, [-1])

    def source(k: tf.Tensor, i: int) -> tf.data.Dataset:
        """A source's records of stream `k` from the start step on, in groups."""
        part = dict(zip(_PART_COLUMNS, tf.unstack(parts[k, i]), strict=True))
        windows = part["end_size"] - part["first_size"]
        permute = permuter(part["key"], part["first_window"], part["skip"])
        return (
            pieces_of(pieces, part["first_piece"], part["end_piece"])
            .rebatch(sizes[part["first_size"] : part["end_size"] + 1])
            .take(windows)
            .enumerate()
            .map(permute)
            # A group may hold none of a source: rebatch then gives an empty batch (and would
            # go on giving them past the records' end; `take` stops it there).
            .rebatch(counts[k, i])
            .take(where["groups"])
        )

    def ordered(k: tf.Tensor) -> Callable[..., tf.Tensor]:
        """A group's records in the order of the stream's positions: each position its
        source's next record (the final group padded to a chunk)."""
        first = stream_rows[k, 2]

        def order(g: tf.Tensor, own: tuple[tf.Tensor, ...]) -> tf.Tensor:
            mine = tags[first + bounds[k, g] : first + bounds[k, g + 1]]
            # Each source's records go to its positions, in order: one stitch, no concat.
            places = tf.split(tf.argsort(mine, stable=True), [tf.shape(o)[0] for o in own])
            found = tf.dynamic_stitch([tf.cast(p, tf.int32) for p in places], list(own))
            pad = tf.where(g < where["full_groups"], 0, chunk - tf.shape(found)[0])
            return tf.pad(found, [[0, pad]])

        return order

    def stream(k: tf.Tensor) -> tf.data.Dataset:
        own = tuple(source(k, i) for i in range(sources))
        return tf.data.Dataset.zip(own).enumerate().map(lambda g, o: ordered(k)(g, o))

    def rows_of(g: tf.Tensor, groups: tf.Tensor) -> tf.Tensor:
        """The streams' groups side by side -> one row a step, cut to this pipeline's part;
        the final group: each stream's part of its records of the final step, in a row."""

        def full() -> tf.Tensor:
            chunks = tf.reshape(groups, [taken, -1, chunk])
            rows = tf.reshape(tf.transpose(chunks, [1, 0, 2]), [-1, taken * chunk])
            return rows[:, where["offset"] : where["offset"] + share]

        def final() -> tf.Tensor:
            at = tf.range(chunk, dtype=tf.int64)[None]
            keep = (at >= stream_rows[:, :1]) & (at < stream_rows[:, 1:2])
            return tf.reshape(tf.boolean_mask(groups, keep), [1, -1])

        return tf.cond(g < where["full_groups"], full, final)

    return (
        tf.data.Dataset.range(taken)
        .interleave(
            stream,
            cycle_length=streams,
            block_length=1,
            num_parallel_calls=num_parallel_calls,
            deterministic=True,
        )
        .batch(tf.maximum(taken, 1))
        .enumerate()
        .map(rows_of)
        .unbatch()
        .filter(lambda row: tf.size(row) > 0)
    )
