"""Several datasets read as one: daily partitions (`gs://b/ds/2026-11-*`, or a list of paths),
or datasets with weights (`{"gs://b/a": 0.7, "gs://b/b-*": 0.3}`).

Each partition is a *source* of the epoch's sequence (`tfdata_reader.sequence`), so every step
holds each one in its share: without weights every record of each once an epoch, with them
each source's quota (`mixing.quotas`; a weight spread over its partitions by their records).
The union keeps each partition's shards and needs one feature spec: a feature's dtype and date
unit must agree everywhere; a feature that may be missing in one partition may be missing in the
union, and one whose value count differs becomes variable length. A partition without a
manifest (its conversion still running, or failed) is left out with a warning, or refused with
`strict`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping, Sequence

from tfdata_reader.manifest import MANIFEST_NAME, FeatureSpec, Manifest, ManifestError, Order

__all__ = [
    "GLOB_CHARACTERS",
    "MAX_READERS",
    "DatasetPath",
    "Named",
    "Sources",
    "is_several",
    "location",
    "merge",
    "named_datasets",
    "partition_paths",
    "read_partitions",
    "sources",
]

_log = logging.getLogger(__name__)
GLOB_CHARACTERS = "*?["
# What a reader is given to read: a dataset, several read as one, or several with weights.
DatasetPath = str | Sequence[str] | Mapping[str, float]
# Sources x streams an input pipeline reads side by side, at most (each one open file).
MAX_READERS = 512


def is_several(path: DatasetPath) -> bool:
    """Whether `path` names several datasets: a list of paths, a glob, or a mapping."""
    return not isinstance(path, str) or any(c in path for c in GLOB_CHARACTERS)


@dataclasses.dataclass(frozen=True)
class Named:
    """The datasets a path names, as the sources they were named as.

    Attributes:
      names: each source as named (a mapping's key; else each dataset folder).
      folders: each source's dataset folders (a key's glob may match several).
      weights: each source's weight (None: a list or a glob, every record once).
    """

    names: tuple[str, ...]
    folders: tuple[tuple[str, ...], ...]
    weights: tuple[float, ...] | None


def named_datasets(path: DatasetPath, glob: Callable[[str], list[str]]) -> Named:
    """The sources `path` names: a mapping's keys with their weights (each key's folders by
    `partition_paths`), else each folder of `partition_paths` alone, without weights; in the
    order of their locations (the order they are named in does not change what is read).

    Raises:
      ValueError: for a weight that is not a finite number at least 0 (or all 0), a key that
        is not a path, a folder named by two keys, and what `partition_paths` refuses.
    """
    if not isinstance(path, Mapping):
        folders = sorted(partition_paths(path, glob), key=location)
        return Named(tuple(folders), tuple((f,) for f in folders), None)
    if not path:
        raise ValueError("no dataset paths given (an empty mapping of datasets to weights)")
    for key, weight in path.items():
        if not isinstance(key, str):
            raise ValueError(f"a dataset with a weight is named by its path, got {key!r}")
        if (
            isinstance(weight, bool)
            or not isinstance(weight, numbers.Real)
            or not math.isfinite(weight)
            or weight < 0
        ):
            raise ValueError(
                f"the weight of {key} must be a finite number at least 0, got {weight!r}"
            )
    if not any(path.values()):
        raise ValueError(f"every weight is 0 ({dict(path)!r}): nothing would be read")
    named = [partition_paths(key, glob) for key in path]
    owner: dict[str, str] = {}
    for key, found in zip(path, named, strict=True):
        for folder in found:
            other = owner.setdefault(location(folder), key)
            if other != key:
                raise ValueError(
                    f"{folder} is named by both {other!r} and {key!r}: give each dataset one weight"
                )
    order = sorted(range(len(named)), key=lambda k: location(named[k][0]))
    keys, weights = list(path), [float(w) for w in path.values()]
    return Named(
        tuple(keys[k] for k in order),
        tuple(tuple(named[k]) for k in order),
        tuple(weights[k] for k in order),
    )


@dataclasses.dataclass(frozen=True)
class Sources:
    """How the shards of datasets read as one divide into the epoch's sources.

    Attributes:
      shards: each source's shards (the merged manifest's, in order).
      weights: each source's weight (None: every record once).
      names: each source's datasets, by location (a run of several: joined by ",").
    """

    shards: tuple[int, ...]
    weights: tuple[float, ...] | None
    names: tuple[str, ...] = ()


def sources(named: Named, partition_records: Sequence[Sequence[int]], streams: int) -> Sources:
    """The epoch's sources: each partition one (with weights, its name's weight spread over
    the name's partitions by their records); more partitions than `MAX_READERS / streams`
    (each source is read side by side on every stream) make runs of consecutive partitions
    (of one name, with weights) one source each. Pure.

    Args:
      named: the sources as named.
      partition_records: each partition's shards' records, name after name, folder after
        folder (as `named.folders` lists them).
      streams: the streams each source is read on.

    Raises:
      ValueError: for more weighted names than can be read side by side, or a name with a
        weight above 0 and no records.
    """
    limit = max(1, MAX_READERS // streams)
    counts = [len(f) for f in named.folders]
    if sum(counts) != len(partition_records):
        raise ValueError(f"{len(partition_records)} partitions' records for {sum(counts)}")
    records = [sum(r) for r in partition_records]
    firsts = [sum(counts[:name]) for name in range(len(counts))]
    folders = [f for own in named.folders for f in own]

    def name(run: list[int]) -> str:
        return ",".join(location(folders[p]) for p in run)

    if named.weights is None:
        runs = _runs(0, len(records), min(limit, len(records)))
        counted = tuple(sum(len(partition_records[p]) for p in run) for run in runs)
        return Sources(counted, None, tuple(name(run) for run in runs))
    if len(counts) > limit:
        raise ValueError(
            f"{len(counts)} datasets with weights are read side by side on {streams} streams "
            f"each, more than {MAX_READERS} readers: give at most {limit} (a glob as one key "
            "reads its datasets as one source), or a smaller global batch"
        )
    shares = [max(1, limit * n // max(1, len(records))) for n in counts]
    while sum(shares) > limit:  # the names' runs, at most the limit in all
        shares[shares.index(max(shares))] -= 1
    shards: list[int] = []
    weights: list[float] = []
    names: list[str] = []
    for key, (first, n, share) in enumerate(zip(firsts, counts, shares, strict=True)):
        of_name = sum(records[first : first + n])
        weight = named.weights[key]
        if weight > 0 and not of_name:
            raise ValueError(f"{named.names[key]} has a weight of {weight} but no records")
        for run in _runs(first, first + n, min(share, n)):
            shards.append(sum(len(partition_records[p]) for p in run))
            weights.append(weight * (sum(records[p] for p in run) / of_name) if of_name else 0.0)
            names.append(name(run))
    return Sources(tuple(shards), tuple(weights), tuple(names))


def _runs(lo: int, hi: int, count: int) -> list[list[int]]:
    """[lo, hi) cut into `count` runs as even as can be."""
    n = hi - lo
    return [list(range(lo + n * g // count, lo + n * (g + 1) // count)) for g in range(count)]


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
      ValueError: when a glob matches nothing, or there is no path at all.
    """
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
