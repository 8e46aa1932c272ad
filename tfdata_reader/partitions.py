"""Several datasets read as one: daily partitions (`gs://b/ds/2026-11-*`, or a list of paths).

The union keeps each partition's shards (so sharding over input pipelines stays exactly-once
over all of them) and needs one feature spec: a feature's dtype and date unit must agree
everywhere; a feature that may be missing in one partition may be missing in the union, and
one whose value count differs becomes variable length. A partition without a manifest (its
conversion still running, or failed) is left out with a warning, or refused with `strict`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence

from tfdata_reader.manifest import MANIFEST_NAME, FeatureSpec, Manifest, ManifestError, Order

__all__ = [
    "GLOB_CHARACTERS",
    "is_several",
    "location",
    "merge",
    "partition_paths",
    "read_partitions",
]

_log = logging.getLogger(__name__)
GLOB_CHARACTERS = "*?["


def is_several(path: str | Sequence[str]) -> bool:
    """Whether `path` names several datasets: a list of paths, or a glob."""
    return not isinstance(path, str) or any(c in path for c in GLOB_CHARACTERS)


def location(path: str) -> str:
    """Where a dataset's manifest is, which is what the dataset is: a folder stands for its
    `manifest.json`; a local path is resolved (`./p1`, `../x/p1`, `file:///.../p1` and a
    symbolic link to p1 are p1), a remote one has its slashes tidied (`gs://b//ds/` is
    `gs://b/ds`)."""
    path = path.rstrip("/")
    if not path.endswith(".json"):
        path = f"{path}/{MANIFEST_NAME}"
    if path.startswith("file://"):
        path = path[len("file://") :]
    if "://" not in path:
        return os.path.realpath(path)
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{re.sub('/+', '/', rest)}"


def partition_paths(path: str | Sequence[str], glob: Callable[[str], list[str]]) -> list[str]:
    """The dataset folders `path` names, each glob expanded (sorted), each folder once (by its
    `location`: one dataset named two ways is read once).

    Raises:
      ValueError: when a glob matches nothing, or there is no path at all; for a mapping
        (datasets with weights), which is not read yet rather than read without its weights.
    """
    if isinstance(path, Mapping):
        raise ValueError(
            f"datasets with weights ({dict(path)!r}) are not supported yet; a list of them reads "
            "them as one, every record of each once an epoch"
        )
    patterns = [path] if isinstance(path, str) else list(path)
    if not patterns:
        raise ValueError("no dataset paths given")
    found: list[str] = []
    for pattern in patterns:
        if any(c in pattern for c in GLOB_CHARACTERS):
            matched = sorted(p.rstrip("/") for p in glob(pattern.rstrip("/")))
            if not matched:
                raise ValueError(f"{pattern} matches no dataset")
            found += matched
        else:
            found.append(pattern.rstrip("/"))
    kept: dict[str, str] = {}
    for folder in found:
        kept.setdefault(location(folder), folder)
    if len(kept) < len(found):
        _log.info("%d dataset path(s) name a folder already listed", len(found) - len(kept))
    return list(kept.values())


def read_partitions(
    paths: Sequence[str],
    read: Callable[[str], Manifest],
    has_manifest: Callable[[str], bool],
    strict: bool,
) -> list[tuple[str, Manifest]]:
    """(path, manifest) of each partition that has a manifest; the others are left out with a
    warning (`strict`: ManifestError) -- a conversion that is running or failed has none yet.

    Raises:
      ManifestError: for a malformed manifest, a missing one with `strict`, or none at all.
    """
    found, missing = [], []
    for path in paths:
        if strict or has_manifest(path):
            found.append((path, read(path)))  # `read` names a missing manifest itself
        else:
            missing.append(path)
    if missing:
        _log.warning(
            "leaving out %d partition(s) without a manifest (running or failed conversions): %s",
            len(missing),
            ", ".join(missing),
        )
    if not found:
        raise ManifestError(f"none of {', '.join(paths)} holds a manifest.json")
    return found


def _merged_feature(name: str, specs: list[tuple[str, FeatureSpec]]) -> FeatureSpec:
    (first_path, first), *others = specs
    shape, nullable = first.shape, first.nullable
    for path, spec in others:
        if (spec.dtype, spec.logical_type) != (first.dtype, first.logical_type):
            raise ValueError(
                f"{path}: feature {name!r} is {_kind(spec)} there but {_kind(first)} in "
                f"{first_path}; the partitions cannot be read as one"
            )
        if spec.shape != shape:
            shape = None  # value counts differ: variable length
        nullable = nullable or spec.nullable
    return dataclasses.replace(first, shape=shape, nullable=nullable)


def _kind(spec: FeatureSpec) -> str:
    return spec.dtype + (f" ({spec.logical_type})" if spec.logical_type else "")


def merge(partitions: Sequence[tuple[str, Manifest]], names: Sequence[str] | None) -> Manifest:
    """One manifest over every partition's shards (in partition order) with their merged spec;
    pure.

    Args:
      partitions: (folder, manifest) of each partition, each already narrowed to a split.
      names: the features to read (None: all, which must then be the same everywhere).

    Raises:
      ValueError: naming the partition and feature for a missing feature or another dtype or
        date unit, and for another compression, label or label vocabulary.
    """
    first_path, first = partitions[0]
    wanted = list(names) if names is not None else [f.name for f in first.features]
    for path, manifest in partitions:
        have = {f.name for f in manifest.features}
        lacking = [n for n in wanted if n not in have]
        extra = sorted(have - set(wanted)) if names is None else []
        if lacking or extra:
            what = f"has no feature {lacking[0]!r}" if lacking else f"has feature {extra[0]!r}"
            raise ValueError(
                f"{path} {what} (the first partition, {first_path}, "
                f"{'lacks' if extra else 'has'} it); pass features=[...] to read only the "
                "features every partition has"
            )
        for attribute in ("compression", "label", "label_vocabulary"):
            here, there = _json_value(manifest, attribute), _json_value(first, attribute)
            if here != there:
                raise ValueError(
                    f"{path}: {attribute} is {here!r} there but {there!r} in {first_path}; the "
                    "partitions cannot be read as one"
                )
    features = [
        _merged_feature(name, [(p, m.feature(name)) for p, m in partitions]) for name in wanted
    ]
    shards = [shard for _, manifest in partitions for shard in manifest.shards]
    # Read in epoch order only when every partition is shuffled (else each keeps its order).
    shuffled = all(m.order.shuffled for _, m in partitions)
    order = first.order if shuffled else Order()
    return dataclasses.replace(first, shards=shards, features=features, order=order)


def _json_value(manifest: Manifest, attribute: str) -> object:
    """An attribute as its manifest records it (a compression by its name)."""
    value = getattr(manifest, attribute)
    return value.value if attribute == "compression" else value
