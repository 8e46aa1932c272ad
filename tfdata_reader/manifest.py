"""The manifest: the contract between the converter and the reader.

`manifest.json` is written last by a conversion and is the only thing readers trust: a shard
that it does not list does not exist. This module is pure (no Beam, no TensorFlow, no I/O) so
both sides import it cheaply; each side reads and writes the JSON text with its own file system.
It is one module on purpose, though past 300 lines: the whole contract is read in one place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any

__all__ = [
    "COMPRESSIONS",
    "DTYPES",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "CompanionFile",
    "Compression",
    "FeatureSpec",
    "Manifest",
    "ManifestError",
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
DTYPES = ("int64", "float32", "bytes")
COMPRESSIONS = ("none", "gzip")
Compression = str  # one of COMPRESSIONS

# Shard prefixes and split names: ASCII, so every file system and URL takes them as they are.
_NAME_RE = re.compile(r"^[A-Za-z0-9_.]+$")
NAME_RULE = "ASCII letters, digits, '_' and '.'"
# prefix-INDEX-of-COUNT[.gGENERATION].tfrecord[.gz]; the generation tells apart the shards of
# successive conversions into one folder (none for the first), so a new conversion never writes
# over a file the current manifest lists.
_GENERATION_TAG = re.compile(r"\.g\d+(?=\.tfrecord)")  # in a shard name
_SHARD_NAME_RE = re.compile(r"^([A-Za-z0-9_.]+?)-\d{5,}-of-\d{5,}(\.g\d+)?\.tfrecord(\.gz)?$")


_LOGICAL_RE = re.compile(
    r"date32\[day\]|timestamp\[(s|ms|us|ns)(, tz=[^\]]+)?\]|(time64|duration)\[(s|ms|us|ns)\]"
)


def is_valid_name(name: str) -> bool:
    """True for a shard prefix or split name: only ASCII letters, digits, '_' and '.'."""
    return bool(_NAME_RE.fullmatch(name))


def shard_prefix_of(name: str) -> str | None:
    """The prefix of a file name that `shard_name` could have made, else None."""
    match = _SHARD_NAME_RE.fullmatch(name)
    return match.group(1) if match else None


class ManifestError(ValueError):
    """A manifest (or a schema file in the same format) is missing, malformed or inconsistent."""


def check_relative_path(path: str, what: str) -> str:
    """`path` if it names a file inside the dataset folder, else raises `ManifestError`.

    A manifest lists files relative to its folder. An absolute path, a URL, a `..` or `.`
    step, an empty step or a backslash could lead a reader or `verify` out of the dataset (to
    `/etc/passwd`, another bucket), so none is accepted.
    """
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or ":" in parts[0]
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ManifestError(
            f"{what} {path!r} is not a plain relative path inside the dataset folder"
        )
    return path


def shard_name(
    prefix: str, index: int, num_shards: int, compression: Compression, generation: int = 0
) -> str:
    """Returns the file name of one shard, e.g. `data-00003-of-00012.tfrecord.gz`, or with a
    generation above 0 `data-00003-of-00012.g2.tfrecord.gz`."""
    if not is_valid_name(prefix):
        raise ValueError(f"a shard prefix may hold only {NAME_RULE}, got {prefix!r}")
    tag = f".g{generation}" if generation else ""
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    return f"{prefix}-{index:05d}-of-{num_shards:05d}{tag}{suffix}"


def with_generation(name: str, generation: int) -> str:
    """A generation-0 shard name as the same shard's name in `generation`."""
    if not generation:
        return name
    stem, dot, rest = name.partition(".tfrecord")
    return f"{stem}.g{generation}{dot}{rest}"


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """One feature of every record.

    Attributes:
      name: feature key in the `tf.train.Example`.
      dtype: "int64", "float32" or "bytes".
      shape: `[]` for one value per record, `[k]` for exactly k values, None for a variable count.
      nullable: True when some records hold the feature with no values (a missing value).
      logical_type: for an int64 feature holding dates or times, what its integers count, as
        the Arrow type they are: `date32[day]` (days since 1970-01-01), `timestamp[us]` or
        `timestamp[us, tz=Europe/Paris]` (microseconds since 1970-01-01 UTC; the time zone
        the source gave), `time64[us]` (microseconds since midnight), `duration[us]`.
      null_values: the cells of a text input (CSV) that were read as missing besides empty
        ones (`NA`, `NULL`, ...); None when there were none to look for.
    """

    name: str
    dtype: str
    shape: list[int] | None = dataclasses.field(default_factory=list)
    nullable: bool = False
    logical_type: str | None = None
    null_values: list[str] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ManifestError("feature name must not be empty")
        if self.dtype not in DTYPES:
            raise ManifestError(
                f"feature {self.name!r}: dtype must be one of {', '.join(DTYPES)}, "
                f"got {self.dtype!r}"
            )
        if self.shape is not None and (
            not isinstance(self.shape, list)
            or any(not isinstance(d, int) or d < 1 for d in self.shape)
        ):
            raise ManifestError(
                f"feature {self.name!r}: shape must be [] (scalar), [k] with k >= 1, or null "
                f"(variable length), got {self.shape!r}"
            )
        if self.logical_type is not None and (
            self.dtype != "int64" or not _LOGICAL_RE.fullmatch(self.logical_type)
        ):
            raise ManifestError(
                f"feature {self.name!r}: logical_type must be date32[day], timestamp[UNIT] or "
                "timestamp[UNIT, tz=ZONE], time64[UNIT] or duration[UNIT] on an int64 feature, "
                f"got {self.logical_type!r} on {self.dtype}"
            )
        if self.null_values is not None and (
            not isinstance(self.null_values, list)
            or any(not isinstance(v, str) for v in self.null_values)
        ):
            raise ManifestError(
                f"feature {self.name!r}: null_values must be a list of texts, got "
                f"{self.null_values!r}"
            )

    @property
    def is_fixed(self) -> bool:
        """True when every record has exactly the same number of values."""
        return self.shape is not None and not self.nullable

    def to_json(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: a manifest of 5,000 features made its JSON
        # and fingerprint (each of them several times a run) in seconds through asdict.
        obj: dict[str, Any] = {
            "name": self.name,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
            "nullable": self.nullable,
        }
        if self.logical_type is not None:
            obj["logical_type"] = self.logical_type
        if self.null_values is not None:
            obj["null_values"] = list(self.null_values)
        return obj

    @classmethod
    def from_json(cls, obj: Any) -> FeatureSpec:
        if not isinstance(obj, dict) or "name" not in obj or "dtype" not in obj:
            raise ManifestError(f"a feature needs at least 'name' and 'dtype', got {obj!r}")
        unknown = set(obj) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ManifestError(f"feature {obj['name']!r}: unknown keys {sorted(unknown)}")
        return cls(
            name=str(obj["name"]),
            dtype=str(obj["dtype"]),
            shape=obj.get("shape", []),
            nullable=bool(obj.get("nullable", False)),
            logical_type=obj.get("logical_type"),
            null_values=obj.get("null_values"),
        )


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One published shard: its path relative to the manifest and what it must contain."""

    path: str
    records: int
    bytes: int
    crc32c: str  # 8 lowercase hex digits: CRC32C (Castagnoli) of the whole file as stored
    split: str | None = None  # with splits: the split this shard belongs to

    def mismatches(self, size: int | None = None, crc32c: int | None = None) -> list[str]:
        """How a stored file's measured size and CRC32C differ from this entry (empty: none)."""
        return _mismatches(self.bytes, self.crc32c, size, crc32c)

    def to_json(self) -> dict[str, Any]:
        obj = dataclasses.asdict(self)
        if self.split is None:
            del obj["split"]
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
    counts: dict[str, Any] = dataclasses.field(default_factory=dict)  # ints, and by feature
    created: str = ""
    tool: dict[str, str] = dataclasses.field(default_factory=dict)
    dead_letter: list[str] = dataclasses.field(default_factory=list)  # JSON-lines files of bad rows
    splits: dict[str, int] = dataclasses.field(default_factory=dict)  # name -> weight
    label_vocabulary: list[str] = dataclasses.field(default_factory=list)  # label id -> name
    label: str | None = None  # the label feature (`convert --label`): the reader's default
    # How many conversions into this folder came before this one; it tags the shard names.
    generation: int = 0
    companions: list[CompanionFile] = dataclasses.field(default_factory=list)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        for shard in self.shards:
            check_relative_path(shard.path, "shard path")
        for companion in self.companions:
            check_relative_path(companion.path, "companion file path")
        for path in self.dead_letter:
            check_relative_path(path, "dead-letter path")
        if self.compression not in COMPRESSIONS:
            raise ManifestError(
                f"compression must be one of {', '.join(COMPRESSIONS)}, got {self.compression!r}"
            )
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
            "compression": self.compression,
            "shards": [
                [_GENERATION_TAG.sub("", s.path), s.records, s.bytes, s.crc32c, s.split]
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
            "compression": self.compression,
            "generation": self.generation,
            "total_records": self.total_records,
            "total_bytes": self.total_bytes,
            "fingerprint": self.fingerprint,
            "features": [f.to_json() for f in self.features],
            "shards": [s.to_json() for s in self.shards],
            "inputs": self.inputs,
            "options": self.options,
            "counts": self.counts,
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
                counts=obj.get("counts", {}),
                created=obj.get("created", ""),
                tool=obj.get("tool", {}),
                dead_letter=list(obj.get("dead_letter", [])),
                splits={k: int(v["weight"]) for k, v in obj.get("splits", {}).items()},
                label_vocabulary=[str(v) for v in obj.get("label_vocabulary", [])],
                label=obj.get("label"),
                generation=int(obj.get("generation", 0)),
                companions=[CompanionFile.from_json(c) for c in obj.get("companions", [])],
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


def schema_to_json(features: list[FeatureSpec]) -> str:
    """The `--schema` file format: the manifest's feature list alone, a feature per line (a
    wide file's schema stays readable, and a diff shows which feature changed)."""
    lines = ",\n".join(f"  {json.dumps(f.to_json())}" for f in features)
    return f'{{"features": [\n{lines}\n]}}\n' if features else '{"features": []}\n'


def schema_from_json(text: str | bytes, source: str = "schema") -> list[FeatureSpec]:
    """Parses a `--schema` file (or a whole manifest, whose `features` it takes)."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise ManifestError(f"{source}: not valid JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("features"), list):
        raise ManifestError(f'{source}: expected {{"features": [...]}}')
    try:
        return [FeatureSpec.from_json(f) for f in obj["features"]]
    except ManifestError as e:
        raise ManifestError(f"{source}: {e}") from e
