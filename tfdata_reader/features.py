"""The feature spec of the contract: each feature's name, type and shape, and the `--schema`
file that holds a list of them (pure: no Beam, no TensorFlow, no I/O)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from tfdata_reader.errors import ManifestError

__all__ = ["DTYPES", "FeatureSpec", "schema_from_json", "schema_to_json"]

DTYPES = ("int64", "float32", "bytes")

_LOGICAL_RE = re.compile(
    r"date32\[day\]|timestamp\[(s|ms|us|ns)(, tz=[^\]]+)?\]|(time64|duration)\[(s|ms|us|ns)\]"
)


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
      unit: what a units line under a CSV header said of the column (`mm`, `kg`, `°C`), taken
        out of the data; None: no such line, or nothing under this name.
    """

    name: str
    dtype: str
    shape: list[int] | None = dataclasses.field(default_factory=list)
    nullable: bool = False
    logical_type: str | None = None
    null_values: list[str] | None = None
    unit: str | None = None

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
        if self.unit is not None and not isinstance(self.unit, str):
            raise ManifestError(f"feature {self.name!r}: unit must be a text, got {self.unit!r}")

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
        if self.unit is not None:
            obj["unit"] = self.unit
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
            unit=obj.get("unit"),
        )


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
