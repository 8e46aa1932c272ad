"""tfrecord-etl's Beam side: convert raw files into size-targeted TFRecord shards.

The public API (imported on first use, so importing the package stays cheap):
  - `convert(input=..., output=..., **flags)`: one conversion from Python, keyword arguments
    mirroring the flags; returns a `ConvertResult` (its `status`: a `ConvertStatus`).
  - `ConvertConfig`: a conversion's validated options (`ConvertConfig.from_flags`).
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

from beam_jobs.core.version import __version__

__all__ = [
    "ConvertConfig",
    "ConvertResult",
    "ConvertStatus",
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
    "ConvertConfig": "beam_jobs.config.convert",
    "ConvertResult": "beam_jobs.job.launcher",
    "ConvertStatus": "beam_jobs.job.launcher",
    "ConvertToShards": "beam_jobs.transforms.convert_to_shards",
    "DataError": "beam_jobs.core.errors",
    "FeatureSpec": "tfdata_reader.manifest",
    "OutputBusy": "beam_jobs.core.errors",
    "TooManyBadRecords": "beam_jobs.core.errors",
    "UsageError": "beam_jobs.core.errors",
    "WriteShards": "beam_jobs.transforms.write_shards",
    "convert": "beam_jobs.api",
    "run": "beam_jobs.job.launcher",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'beam_jobs' has no attribute {name!r}")
