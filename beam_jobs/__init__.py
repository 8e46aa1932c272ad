"""tfrecord-etl's Beam side: convert raw files into size-targeted TFRecord shards.

The public API (imported on first use, so importing the package stays cheap):
  - `convert(input=..., output=..., **flags)`: one conversion from Python, keyword arguments
    mirroring the flags; returns a `ConvertResult`.
  - `run(argv)`: one conversion with command-line arguments (what `tfrecord-etl convert` runs);
    returns a `ConvertResult`.
  - `ConvertToShards(plan, config, version)`: the conversion pipeline as a PTransform.
  - `WriteShards(output_dir, ...)`: size-targeted shards and a manifest from any PCollection.
  - `FeatureSpec`: one feature of the manifest's spec.
  - `DataError`, `UsageError`, `TooManyBadRecords`, `OutputBusy`: what a conversion raises.
Everything else is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import Any

from beam_jobs.version import __version__

__all__ = [
    "ConvertResult",
    "ConvertToShards",
    "DataError",
    "FeatureSpec",
    "OutputBusy",
    "TooManyBadRecords",
    "UsageError",
    "WriteShards",
    "__version__",
    "convert",
    "run",
]

_LAZY = {
    "ConvertResult": "beam_jobs.launcher",
    "ConvertToShards": "beam_jobs.pipeline",
    "DataError": "beam_jobs.errors",
    "FeatureSpec": "tfdata_reader.manifest",
    "OutputBusy": "beam_jobs.errors",
    "TooManyBadRecords": "beam_jobs.errors",
    "UsageError": "beam_jobs.errors",
    "WriteShards": "beam_jobs.write_shards",
    "convert": "beam_jobs.api",
    "run": "beam_jobs.launcher",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'beam_jobs' has no attribute {name!r}")
