"""`distribute`: a converted dataset as a `tf.distribute` distributed dataset."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tfdata_reader.dataset import check_batch_size, make_dataset
from tfdata_reader.partitions import DatasetPath

__all__ = ["distribute"]


def distribute(
    strategy: tf.distribute.Strategy,
    path: DatasetPath,
    global_batch_size: int,
    **options: Any,
) -> tf.distribute.DistributedDataset:
    """Reads `path` through `strategy.distribute_datasets_from_function`.

    Each input pipeline (one per worker process) reads its own part of the data, so an epoch
    delivers every record exactly once across all workers and replicas (less a final partial
    batch with `drop_remainder=True`): of a shuffled dataset, its part of every global step of
    the epoch order, which holds the same records on any number of workers (and resumes from
    a `ReadPosition`, `position=`); of one in input order, its own shards, or its own record
    range when there are fewer shards than pipelines. Batches are per replica:
    `global_batch_size / strategy.num_replicas_in_sync` records.

    Args:
      strategy: e.g. `MirroredStrategy` or `MultiWorkerMirroredStrategy`.
      path: the dataset directory or its manifest.json; or several datasets read as one (a
        list, or a glob over dataset folders), or a mapping of datasets to weights, as
        `make_dataset` takes them.
      global_batch_size: records per step over all replicas; must divide evenly among them.
      **options: any other `make_dataset` argument (seed, num_epochs, label_key, position,
        ...).
    """
    check_batch_size("global_batch_size", global_batch_size)
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise ValueError(
            f"global_batch_size {global_batch_size} does not divide among {replicas} replicas; "
            f"use a multiple of {replicas}"
        )
    if "input_context" in options or "batch_size" in options:
        raise ValueError("distribute() sets batch_size and input_context itself")

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch_size = context.get_per_replica_batch_size(global_batch_size)
        return make_dataset(path, batch_size, input_context=context, **options)

    return strategy.distribute_datasets_from_function(dataset_fn)
