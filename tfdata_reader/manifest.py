"""The manifest: the contract between the converter and the reader.

`manifest.json` is written last by a conversion and is the only thing readers trust: a shard
that it does not list does not exist. This module is pure (no Beam, no TensorFlow, no I/O) so
both sides import it cheaply; each side reads and writes the JSON text with its own file system.
The manifest document is here; the feature spec (`features`) and the names of files and
compressions (`names`) are beside it, and re-exported here: `tfdata_reader.manifest` is the one
import of the contract.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Iterable
from typing import Any

from tfdata_reader.errors import ManifestError
from tfdata_reader.features import DTYPES, FeatureSpec, schema_from_json, schema_to_json
from tfdata_reader.names import (
    COMPRESSIONS,
    NAME_RULE,
    Choice,
    Compression,
    check_relative_path,
    is_valid_name,
    shard_name,
    shard_prefix_of,
    with_generation,
    without_generation,
)

__all__ = [
    "COMPRESSIONS",
    "DTYPES",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "NAME_RULE",
    "CompanionFile",
    "Compression",
    "Counts",
    "FeatureSpec",
    "Manifest",
    "ManifestError",
    "Order",
    "RecordOrder",
    "ShardInfo",
    "check_relative_path",
    "is_valid_name",
    "schema_from_json",
    "schema_to_json",
    "shard_name",
    "shard_prefix_of",
    "with_generation",
]

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One published shard: its path relative to the manifest and what it must contain."""

    path: str
    records: int
    bytes: int
    crc32c: str  # 8 lowercase hex digits: CRC32C (Castagnoli) of the whole file as stored
    split: str | None = None  # with splits: the split this shard belongs to
    # Where a reader may start reading mid-shard: (record, byte offset of its frame in the
    # framed stream, i.e. after GZIP decompression), ascending, record 0 implied.
    seek: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        for (r0, o0), (r1, o1) in itertools.pairwise([(0, 0), *self.seek]):
            if not (r0 < r1 < self.records and o0 < o1):
                raise ManifestError(
                    f"shard {self.path}: seek points must ascend within its {self.records} "
                    f"records, got {list(self.seek)}"
                )

    def seek_point(self, record: int) -> tuple[int, int]:
        """The last seek point at or before `record`: (its record, its byte offset)."""
        found = (0, 0)
        for point in self.seek:
            if point[0] > record:
                break
            found = point
        return found

    def mismatches(self, size: int | None = None, crc32c: int | None = None) -> list[str]:
        """How a stored file's measured size and CRC32C differ from this entry (empty: none)."""
        return _mismatches(self.bytes, self.crc32c, size, crc32c)

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "path": self.path,
            "records": self.records,
            "bytes": self.bytes,
            "crc32c": self.crc32c,
        }
        if self.split is not None:
            obj["split"] = self.split
        if self.seek:
            obj["seek"] = [list(point) for point in self.seek]
        return obj

    @classmethod
    def from_json(cls, obj: Any) -> ShardInfo:
        try:
            return cls(
                path=str(obj["path"]),
                records=int(obj["records"]),
                bytes=int(obj["bytes"]),
                crc32c=str(obj["crc32c"]),
                split=None if obj.get("split") is None else str(obj["split"]),
                seek=tuple((int(r), int(o)) for r, o in obj.get("seek", [])),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"malformed shard entry {obj!r}: {e}") from e


def _mismatches(bytes_: int, crc: str, size: int | None, crc32c: int | None) -> list[str]:
    found = []
    if size is not None and size != bytes_:
        found.append(f"size is {size} bytes, manifest says {bytes_}")
    if crc32c is not None and f"{crc32c:08x}" != crc:
        found.append(f"crc32c is {crc32c:08x}, manifest says {crc}")
    return found


def _int_map(obj: Any, what: str) -> dict[str, int]:
    if not isinstance(obj, dict) or not all(isinstance(v, int) for v in obj.values()):
        raise ManifestError(f"counts: {what} must map names to whole numbers, got {obj!r}")
    return {str(k): int(v) for k, v in obj.items()}


@dataclasses.dataclass(frozen=True)
class Counts:
    """What a conversion counted, as its manifest's `counts` records it.

    Attributes:
      records_read: input rows read (None: not recorded, as in a manifest made by hand).
      records_written: records the shards hold (None: not recorded).
      bad_records: rows set aside in the dead letter.
      input_bytes_read: input bytes the writers read.
      missing_values: by feature, the records that hold no value of it (recorded as
        `null_values` before 2026-12-06, which is still read).
      ignored_fields: by key, the values of keys the spec lacks, left out (JSON lines).
      float32_rounded_integers: by float32 feature, whole numbers float32 changed.
      float32_stored_as_zero: by float32 feature, numbers below float32's range (1e-50),
        stored as 0.
      null_markers: by feature, cells read as missing for holding a marker (`NA`, `NULL`).
      markers_seen: by feature, those cells by marker as written (`{"x": {"NA": 3, ".": 1}}`).
      short_rows: by input file, CSV rows with fewer fields than the header, read with their
        missing trailing fields missing.
      notes_lines: by input file, CSV lines of notes after the last row of the table (a
        source line, footnotes), left out.
      tasks: the run's tasks (write tasks and the shuffle's units; 0: not recorded).
      tasks_reused: of those, the ones whose finished work a failed run had kept, checked and
        reused (a resumed conversion).

    Writers carry their own `Counts` (what they read and set aside) to publishing, which adds
    them up (`total`): one tally under the manifest's names from end to end.
    """

    records_read: int | None = None
    records_written: int | None = None
    bad_records: int = 0
    input_bytes_read: int = 0
    missing_values: dict[str, int] = dataclasses.field(default_factory=dict)
    ignored_fields: dict[str, int] = dataclasses.field(default_factory=dict)
    float32_rounded_integers: dict[str, int] = dataclasses.field(default_factory=dict)
    float32_stored_as_zero: dict[str, int] = dataclasses.field(default_factory=dict)
    null_markers: dict[str, int] = dataclasses.field(default_factory=dict)
    markers_seen: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    short_rows: dict[str, int] = dataclasses.field(default_factory=dict)
    notes_lines: dict[str, int] = dataclasses.field(default_factory=dict)
    tasks: int = 0
    tasks_reused: int = 0

    @classmethod
    def total(cls, counts: Iterable[Counts]) -> Counts:
        """Counts added up: numbers summed (an unrecorded one counts 0), counts by name summed
        by name (and by name within a name), names sorted."""
        sums: dict[str, Any] = {}
        for each in counts:
            for field in dataclasses.fields(cls):
                value = getattr(each, field.name)
                if isinstance(value, dict):
                    _add_up(sums.setdefault(field.name, {}), value)
                else:
                    sums[field.name] = sums.get(field.name, 0) + (value or 0)
        return cls(**{k: _sorted(v) for k, v in sums.items()})

    @property
    def recorded(self) -> bool:
        """Whether the conversion recorded its counts (rows in and out)."""
        return self.records_read is not None and self.records_written is not None

    def to_json(self) -> dict[str, Any]:
        if not self.recorded:
            return {}
        obj: dict[str, Any] = {
            "records_read": self.records_read,
            "records_written": self.records_written,
            "bad_records": self.bad_records,
            "input_bytes_read": self.input_bytes_read,
            "missing_values": dict(self.missing_values),
        }
        for name in _COUNT_MAPS:
            if getattr(self, name):
                obj[name] = dict(getattr(self, name))
        if self.markers_seen:
            obj["markers_seen"] = {k: dict(v) for k, v in self.markers_seen.items()}
        if self.tasks:
            obj["tasks"] = self.tasks
            obj["tasks_reused"] = self.tasks_reused
        return obj

    @classmethod
    def from_json(cls, obj: Any) -> Counts:
        if not isinstance(obj, dict):
            raise ManifestError(f"counts must be an object, got {obj!r}")
        try:
            return cls(
                records_read=_optional_int(obj.get("records_read")),
                records_written=_optional_int(obj.get("records_written")),
                bad_records=int(obj.get("bad_records", 0)),
                input_bytes_read=int(obj.get("input_bytes_read", 0)),
                missing_values=_int_map(
                    obj.get("missing_values", obj.get("null_values", {})), "missing_values"
                ),
                **{name: _int_map(obj.get(name, {}), name) for name in _COUNT_MAPS},
                markers_seen=_int_maps(obj.get("markers_seen", {}), "markers_seen"),
                tasks=int(obj.get("tasks", 0)),
                tasks_reused=int(obj.get("tasks_reused", 0)),
            )
        except (TypeError, ValueError) as e:
            if isinstance(e, ManifestError):
                raise
            raise ManifestError(f"malformed counts {obj!r}: {e}") from e


# Counts by name recorded only when there are any.
_COUNT_MAPS = (
    "ignored_fields",
    "float32_rounded_integers",
    "float32_stored_as_zero",
    "null_markers",
    "short_rows",
    "notes_lines",
)


def _add_up(into: dict[str, Any], counts: dict[str, Any]) -> None:
    for name, count in counts.items():
        if isinstance(count, dict):
            _add_up(into.setdefault(name, {}), count)
        else:
            into[name] = into.get(name, 0) + count


def _sorted(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: _sorted(v) for k, v in sorted(value.items())}


def _int_maps(obj: Any, what: str) -> dict[str, dict[str, int]]:
    if not isinstance(obj, dict):
        raise ManifestError(f"counts: {what} must map names to counts by name, got {obj!r}")
    return {str(k): _int_map(v, what) for k, v in obj.items()}


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


class RecordOrder(Choice):
    """The order a dataset's records are stored in."""

    SHUFFLED = "shuffled"  # a seeded random order across all shards (the default)
    INPUT = "input"  # the inputs' order: files sorted by path, rows in file order


@dataclasses.dataclass(frozen=True)
class Order:
    """How a dataset's records are ordered (the manifest's `order`): shuffled with `seed`, or
    as the inputs were. A manifest without it (written before 2026-12-06) holds input order."""

    kind: RecordOrder = RecordOrder.INPUT
    seed: int | None = None

    @property
    def shuffled(self) -> bool:
        return self.kind is RecordOrder.SHUFFLED

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value} | ({"seed": self.seed} if self.seed is not None else {})

    @classmethod
    def from_json(cls, obj: Any) -> Order:
        try:
            seed = obj.get("seed")
            return cls(RecordOrder(obj["kind"]), None if seed is None else int(seed))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"malformed order {obj!r}: {e}") from e


@dataclasses.dataclass(frozen=True)
class CompanionFile:
    """A file published beside the shards that describes them (`schema.pbtxt`,
    `statistics.pb`, TFDS's files), with its size and CRC32C as written: a copy that a
    conversion which then failed to publish left in its place no longer matches."""

    path: str
    bytes: int
    crc32c: str

    def mismatches(self, size: int | None = None, crc32c: int | None = None) -> list[str]:
        """How a stored file's measured size and CRC32C differ from this entry (empty: none)."""
        return _mismatches(self.bytes, self.crc32c, size, crc32c)

    @classmethod
    def from_json(cls, obj: Any) -> CompanionFile:
        try:
            return cls(str(obj["path"]), int(obj["bytes"]), str(obj["crc32c"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(f"malformed companion file entry {obj!r}: {e}") from e


@dataclasses.dataclass(frozen=True)
class Manifest:
    """Everything a reader or `verify` needs to know about one converted dataset."""

    shards: list[ShardInfo]
    features: list[FeatureSpec]
    compression: Compression
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    counts: Counts = dataclasses.field(default_factory=Counts)
    created: str = ""
    tool: dict[str, str] = dataclasses.field(default_factory=dict)
    dead_letter: list[str] = dataclasses.field(default_factory=list)  # JSON-lines files of bad rows
    splits: dict[str, int] = dataclasses.field(default_factory=dict)  # name -> weight
    label_vocabulary: list[str] = dataclasses.field(default_factory=list)  # label id -> name
    label: str | None = None  # the label feature (`convert --label`): the reader's default
    # How many conversions into this folder came before this one; it tags the shard names.
    generation: int = 0
    companions: list[CompanionFile] = dataclasses.field(default_factory=list)
    order: Order = dataclasses.field(default_factory=Order)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        for shard in self.shards:
            check_relative_path(shard.path, "shard path")
        for companion in self.companions:
            check_relative_path(companion.path, "companion file path")
        for path in self.dead_letter:
            check_relative_path(path, "dead-letter path")
        try:  # the enum's value (JSON's text, or a member) as the member
            object.__setattr__(self, "compression", Compression(self.compression))
        except ValueError:
            raise ManifestError(
                f"compression must be one of {', '.join(COMPRESSIONS)}, got {self.compression!r}"
            ) from None
        names = [f.name for f in self.features]
        if len(set(names)) != len(names):
            raise ManifestError(f"duplicate feature names in {names}")

    @property
    def total_records(self) -> int:
        return sum(s.records for s in self.shards)

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def fingerprint(self) -> str:
        """The dataset's identity: a SHA-256 over what its records are and how they are stored
        (features, label, splits, compression, and each shard's name without its generation
        tag, records, size and crc32c), with no times, paths or options. Two datasets with the
        same fingerprint hold the same bytes. A feature's `null_values` say how its input was
        read, not what its records hold: they are left out."""
        canonical = {
            "features": [
                {k: v for k, v in f.to_json().items() if k != "null_values"} for f in self.features
            ],
            "label": self.label,
            "label_vocabulary": self.label_vocabulary,
            "splits": self.splits,
            "compression": self.compression.value,
            "shards": [
                [without_generation(s.path), s.records, s.bytes, s.crc32c, s.split]
                for s in self.shards
            ],
        }
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    def split(self, name: str | None) -> Manifest:
        """This manifest with only one split's shards (all of them for None).

        Raises:
          ValueError: naming the splits there are, for an unknown split.
        """
        if name is None:
            return self
        if name not in self.splits:
            known = ", ".join(self.splits) or "none: it was converted without --splits"
            raise ValueError(f"no split {name!r} in this dataset; its splits: {known}")
        return dataclasses.replace(self, shards=[s for s in self.shards if s.split == name])

    def split_summary(self) -> dict[str, dict[str, int]]:
        """Per split: its weight, shards, records and bytes (the manifest's splits section)."""
        return {
            name: {
                "weight": weight,
                "shards": sum(1 for s in self.shards if s.split == name),
                "records": sum(s.records for s in self.shards if s.split == name),
                "bytes": sum(s.bytes for s in self.shards if s.split == name),
            }
            for name, weight in self.splits.items()
        }

    def feature(self, name: str) -> FeatureSpec:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(f"no feature {name!r}; the manifest has {[f.name for f in self.features]}")

    def to_json(self) -> str:
        obj = {
            "format_version": self.format_version,
            "tool": self.tool,
            "created": self.created,
            "compression": self.compression.value,
            "order": self.order.to_json(),
            "generation": self.generation,
            "total_records": self.total_records,
            "total_bytes": self.total_bytes,
            "fingerprint": self.fingerprint,
            "features": [f.to_json() for f in self.features],
            "shards": [s.to_json() for s in self.shards],
            "inputs": self.inputs,
            "options": self.options,
            "counts": self.counts.to_json(),
            "dead_letter": self.dead_letter,
        }
        if self.companions:
            obj["companions"] = [dataclasses.asdict(c) for c in self.companions]
        if self.splits:
            obj["splits"] = self.split_summary()
        if self.label_vocabulary:
            obj["label_vocabulary"] = self.label_vocabulary
        if self.label is not None:
            obj["label"] = self.label
        return json.dumps(obj, indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "manifest") -> Manifest:
        """Parses manifest text; `source` names the file in errors."""
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ManifestError(f"{source}: not valid JSON: {e}") from e
        if not isinstance(obj, dict):
            raise ManifestError(f"{source}: expected a JSON object, got {type(obj).__name__}")
        version = obj.get("format_version")
        if version != FORMAT_VERSION:
            raise ManifestError(
                f"{source}: format_version {version!r} is not supported by this reader "
                f"(supports {FORMAT_VERSION}); upgrade tfrecord-etl"
            )
        try:
            manifest = cls(
                shards=[ShardInfo.from_json(s) for s in obj["shards"]],
                features=[FeatureSpec.from_json(f) for f in obj["features"]],
                compression=obj["compression"],
                inputs=obj.get("inputs", {}),
                options=obj.get("options", {}),
                counts=Counts.from_json(obj.get("counts", {})),
                created=obj.get("created", ""),
                tool=obj.get("tool", {}),
                dead_letter=list(obj.get("dead_letter", [])),
                splits={k: int(v["weight"]) for k, v in obj.get("splits", {}).items()},
                label_vocabulary=[str(v) for v in obj.get("label_vocabulary", [])],
                label=obj.get("label"),
                generation=int(obj.get("generation", 0)),
                companions=[CompanionFile.from_json(c) for c in obj.get("companions", [])],
                order=Order.from_json(obj["order"]) if "order" in obj else Order(),
            )
        except (KeyError, TypeError) as e:
            raise ManifestError(f"{source}: missing key {e}") from e
        except ManifestError as e:
            raise ManifestError(f"{source}: {e}") from e
        if obj.get("fingerprint", manifest.fingerprint) != manifest.fingerprint:
            raise ManifestError(
                f"{source}: fingerprint {obj['fingerprint']} does not match its features and "
                f"shards ({manifest.fingerprint}): the manifest was edited"
            )
        if obj.get("total_records", manifest.total_records) != manifest.total_records:
            raise ManifestError(
                f"{source}: total_records {obj['total_records']} does not equal the sum over "
                f"shards "
                f"{manifest.total_records}"
            )
        return manifest
