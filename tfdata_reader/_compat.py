"""The one private TensorFlow API the reader uses, behind a fallback.

`Dataset.map` always runs its function through tf.data's inter-op thread pool, a hop per op.
TF's own `_MapDataset` has a switch (`use_inter_op_parallelism=False`) that runs a small
function inline on the calling thread instead: for the reader's per-block count check that
was a third of its CPU time (see `records`). Should a TensorFlow release drop or change the
class, `inline_map` falls back to `Dataset.map`: slower, same results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

__all__ = ["HAS_INLINE_MAP", "inline_map"]

try:
    from tensorflow.python.data.ops.map_op import _MapDataset
except ImportError:  # pragma: no cover - exercised by the fallback test with it hidden
    _MapDataset = None

HAS_INLINE_MAP = _MapDataset is not None


def inline_map(dataset: tf.data.Dataset, fn: Callable[..., Any]) -> tf.data.Dataset:
    """`dataset.map(fn)`, run inline (single-threaded executor) where this TensorFlow allows."""
    if _MapDataset is None:
        return dataset.map(fn)
    try:
        return _MapDataset(dataset, fn, use_inter_op_parallelism=False, preserve_cardinality=True)
    except TypeError:  # the private signature changed
        return dataset.map(fn)
