"""What TensorFlow Datasets needs to load a converted folder with
`tfds.builder_from_directory(OUT)`: `dataset_info.json` (splits, their shards' record counts and
a file-name template per split) and `features.json` (each feature as a TFDS `Tensor`).

TFDS names shards by a template per split; `{SHARD_X_OF_Y}` is `00003-of-00012`, the part of
our shard names between prefix and suffix, so one template describes every name we write
(`train-{SHARD_X_OF_Y}.g2.tfrecord`). A dataset without splits is TFDS's split "train".
TFDS reads TFRecord files uncompressed only: GZIP datasets get no TFDS files. A split with no
records is left out (TFDS fails on reading one); asking TFDS for it is an unknown split.

TFDS parses a `shape ()` feature as present in every record, so a one-value feature that may
be missing becomes a `(None,)` tensor (one value, or none), as does any feature of varying
length.
"""

from __future__ import annotations

import json
import re
from typing import Any

from beam_jobs.core.compression import Compression
from tfdata_reader.manifest import FeatureSpec, Manifest

__all__ = ["DATASET_INFO_NAME", "FEATURES_NAME", "TFDS_NAMES", "tfds_files"]

DATASET_INFO_NAME = "dataset_info.json"
FEATURES_NAME = "features.json"
TFDS_NAMES = (DATASET_INFO_NAME, FEATURES_NAME)
UNSPLIT = "train"
_X_OF_Y = re.compile(r"-(\d{5})-of-(\d{5})(?=\.)")
_DTYPES = {"int64": "int64", "float32": "float32", "bytes": "string"}
_TENSOR = "tensorflow_datasets.core.features.tensor_feature.Tensor"
_DICT = "tensorflow_datasets.core.features.features_dict.FeaturesDict"


def tfds_files(manifest: Manifest, name: str = "tfrecord_etl") -> dict[str, str] | None:
    """File name -> text of the TFDS files for `manifest`, or None when TFDS cannot read the
    dataset (GZIP shards, or shard names no template describes)."""
    if manifest.compression != Compression.NONE:
        return None
    splits = []
    names: list[str | None] = [*manifest.splits] or [None]
    for split in names:
        shards = [s for s in manifest.shards if s.split == split]
        if not any(s.records for s in shards):
            continue  # TFDS cannot read a split of empty shards: it is left out
        template = _template([s.path for s in shards])
        if template is None:
            return None
        splits.append(
            {
                "filepathTemplate": template,
                "name": split or UNSPLIT,
                "numBytes": str(sum(s.bytes for s in shards)),
                "shardLengths": [str(s.records) for s in shards],
            }
        )
    info = {
        "name": name,
        "version": "1.0.0",
        "description": f"Converted by tfrecord-etl; fingerprint {manifest.fingerprint}.",
        "fileFormat": "tfrecord",
        "splits": splits,
    }
    features = {
        "pythonClassName": _DICT,
        "featuresDict": {"features": {f.name: _tensor(f) for f in manifest.features}},
    }
    return {
        DATASET_INFO_NAME: json.dumps(info, indent=2) + "\n",
        FEATURES_NAME: json.dumps(features, indent=2) + "\n",
    }


def _template(paths: list[str]) -> str | None:
    """The one template whose `{SHARD_X_OF_Y}` gives every path, or None."""
    if not paths:
        return None
    template = _X_OF_Y.sub("-{SHARD_X_OF_Y}", paths[0], count=1)
    count = len(paths)
    expected = [template.replace("{SHARD_X_OF_Y}", f"{i:05d}-of-{count:05d}") for i in range(count)]
    return template if paths == expected and "{SHARD_X_OF_Y}" in template else None


def _tensor(feature: FeatureSpec) -> dict[str, Any]:
    # Varying length, or a value that may be missing: TFDS's (None,).
    varying = feature.shape is None or feature.nullable
    shape = feature.shape
    dimensions = ["-1"] if varying or shape is None else [str(d) for d in shape]
    return {
        "pythonClassName": _TENSOR,
        "tensor": {
            "dtype": _DTYPES[feature.dtype],
            "encoding": "none",
            "shape": {"dimensions": dimensions} if dimensions else {},
        },
    }
