"""Feature specs from Python rows: parsed JSON objects, or the dicts a pipeline hands
`WriteShards`. Nested objects become dotted names; a key whose values are text in some rows and
numbers in others takes the type most rows have (the others are dead-lettered when written)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Sequence
from typing import Any

from beam_jobs.core.errors import DataError
from tfdata_reader.manifest import FeatureSpec

__all__ = ["flatten_object", "infer_from_rows"]

_log = logging.getLogger(__name__)


def flatten_object(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys; other values as they are."""
    flat: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_object(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (str, bytes)):
        return "str"
    return "float" if isinstance(value, float) else "int"


def infer_from_rows(rows: Sequence[dict[str, Any]], path: str) -> list[FeatureSpec]:
    """Feature specs from parsed lines; a key whose values are text in some lines and numbers
    in others takes the type most lines have (the others are dead-lettered when written)."""
    counts: dict[str, collections.Counter[str]] = {}
    for row in rows:
        for key, value in row.items():
            found = counts.setdefault(key, collections.Counter())
            if isinstance(value, list):
                found["list"] += 1
                kinds = {_kind(v) for v in value}
                for v in value:
                    if isinstance(v, (dict, list)):
                        raise DataError(
                            f"{path}: key {key!r} holds a list of {type(v).__name__}s, which no "
                            "tf.train.Example feature can hold; flatten it upstream"
                        )
                found.update(kinds)
            else:
                found[_kind(value)] += 1
    features = []
    for key, found in counts.items():
        if not key:
            # `{"": 5}`: no Example feature can be named so; its values are counted as left out.
            _log.warning("%s: a key is the empty string; its values are left out", path)
            continue
        numbers = found["int"] + found["float"]
        if found["str"] and found["str"] >= numbers:
            dtype = "bytes"
        elif found["float"]:
            dtype = "float32"
        elif found["int"]:
            dtype = "int64"
        else:
            dtype = "bytes"  # only nulls and empty lists so far
        nullable = bool(found["null"]) or any(key not in row for row in rows)
        features.append(FeatureSpec(key, dtype, None if found["list"] else [], nullable))
    return features
