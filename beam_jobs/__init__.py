"""tfrecord-etl's Beam side: convert raw files into size-targeted TFRecord shards.

`beam_jobs.WriteShards` is the public PTransform for users' own pipelines; it is imported on
first use, so importing the package stays cheap.
"""

from __future__ import annotations

from typing import Any

from beam_jobs.version import __version__

__all__ = ["WriteShards", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "WriteShards":
        from beam_jobs.write_shards import WriteShards

        return WriteShards
    raise AttributeError(f"module 'beam_jobs' has no attribute {name!r}")
