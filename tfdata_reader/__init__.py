"""tfrecord-etl's training side: read a converted dataset's shards with tf.data.

`make_dataset` imports TensorFlow; `tfdata_reader.manifest` does not, so the Beam converter can
share the manifest code without paying TensorFlow's import in every worker.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ReadOptions",
    "ReadPosition",
    "distribute",
    "make_dataset",
    "read_manifest",
    "steps_per_epoch",
]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package (or its manifest module) must not import TensorFlow.
    if name == "distribute":
        from tfdata_reader.distributed import distribute

        return distribute
    if name == "ReadOptions":
        from tfdata_reader.options import ReadOptions

        return ReadOptions
    if name == "ReadPosition":
        from tfdata_reader.position import ReadPosition

        return ReadPosition
    if name in __all__:
        from tfdata_reader import dataset

        return getattr(dataset, name)
    raise AttributeError(f"module 'tfdata_reader' has no attribute {name!r}")
