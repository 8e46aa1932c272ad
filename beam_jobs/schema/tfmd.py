"""Feature specs as a TensorFlow Metadata `Schema` (`schema.pbtxt`, TFX's and TFDV's), and back.

Written beside every dataset; read by `--schema` when the file is a text-format Schema, so a
schema curated in TFX drives a conversion. The mapping:

    dtype         int64 / float32 / bytes    <->  type INT / FLOAT / BYTES
    shape []      one value per record       <->  shape {} (or TFDV's shape { dim { size: 1 } })
    shape [k]     k values                   <->  shape { dim { size: k } }
    shape null    any number                 <->  value_count { min: 0 } (min: 1, never missing)
    nullable      may be missing             <->  presence { min_fraction < 1 }; value_count max 1
    logical_type  date32[day], timestamp[us] <->  time_domain { integer_format: UNIX_DAYS ... },
                                                   and exactly, an annotation tag
                                                   `tfrecord_etl.logical_type=<type>`
    null_values   a text input's markers     <->  an annotation tag
                                                   `tfrecord_etl.null_values=<JSON list>`
    unit          a CSV units line's cell    <->  an annotation tag
                                                   `tfrecord_etl.unit=<JSON text>`
    a label with a vocabulary                 ->  string_domain (text) / categorical int_domain

Features marked deprecated, or in the PLANNED, DEPRECATED or DISABLED lifecycle stage, are not
in the data, so `--schema` leaves them to inference like any feature it does not list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from tfdata_reader.manifest import FeatureSpec, ManifestError

__all__ = ["SCHEMA_NAME", "schema_from_pbtxt", "schema_pbtxt"]

SCHEMA_NAME = "schema.pbtxt"
_TAG = "tfrecord_etl.logical_type="
_MARKERS_TAG = "tfrecord_etl.null_values="  # + the JSON list of a text input's markers
_UNIT_TAG = "tfrecord_etl.unit="  # + the JSON text of a CSV column's unit
_TYPES = {"int64": "INT", "float32": "FLOAT", "bytes": "BYTES"}
_TIME_FORMATS = {
    "date32[day]": "UNIX_DAYS",
    "timestamp[s]": "UNIX_SECONDS",
    "timestamp[ms]": "UNIX_MILLISECONDS",
    "timestamp[us]": "UNIX_MICROSECONDS",
    "timestamp[ns]": "UNIX_NANOSECONDS",
}
_NOT_IN_DATA = ("PLANNED", "DEPRECATED", "DISABLED")


def _time_format(logical_type: str) -> str | None:
    """TFMD's integer time format of a logical type (a zoned timestamp counts from the same
    epoch in UTC); None for times of day and durations, which have none."""
    return _TIME_FORMATS.get(logical_type.split(",", 1)[0].rstrip("]") + "]")


def schema_pbtxt(
    features: Sequence[FeatureSpec],
    label: str | None = None,
    label_vocabulary: Sequence[str] = (),
) -> str:
    """The text-format TFMD `Schema` of a feature spec."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for spec in features:
        feature = schema.feature.add(name=spec.name)
        feature.type = schema_pb2.FeatureType.Value(_TYPES[spec.dtype])
        if spec.nullable:
            feature.presence.min_count = 0
        else:
            feature.presence.min_fraction = 1.0
            feature.presence.min_count = 1
        if spec.shape is None:
            feature.value_count.min = 0 if spec.nullable else 1
        elif spec.nullable:  # a missing value is an empty list: not a fixed shape
            feature.value_count.min = 0
            feature.value_count.max = spec.shape[0] if spec.shape else 1
        else:
            feature.shape.SetInParent()
            for size in spec.shape:
                feature.shape.dim.add(size=size)
        if spec.logical_type:
            time_format = _time_format(spec.logical_type)
            if time_format:
                feature.time_domain.integer_format = schema_pb2.TimeDomain.IntegerTimeFormat.Value(
                    time_format
                )
            feature.annotation.tag.append(_TAG + spec.logical_type)
        feature.annotation.tag.extend(_our_tags(spec))
        if spec.name == label and label_vocabulary:
            if spec.dtype == "bytes":
                schema.string_domain.add(name=spec.name, value=list(label_vocabulary))
                feature.domain = spec.name
            elif spec.dtype == "int64":
                feature.int_domain.min = 0
                feature.int_domain.max = len(label_vocabulary) - 1
                feature.int_domain.is_categorical = True
    return text_format.MessageToString(schema)


def _our_tags(spec: FeatureSpec) -> list[str]:
    """The annotation tags that carry what TFMD has no field for: the markers (so that
    --schema reads the same cells as missing) and the unit."""
    tags = []
    if spec.null_values is not None:
        tags.append(_MARKERS_TAG + json.dumps(list(spec.null_values)))
    if spec.unit is not None:
        tags.append(_UNIT_TAG + json.dumps(spec.unit))
    return tags


def _shape(feature, source: str) -> tuple[list[int] | None, bool]:
    """(shape, whether a record may have fewer values) of a TFMD feature."""
    if feature.HasField("shape"):
        dims = [d.size for d in feature.shape.dim]
        if len(dims) > 1:
            raise ManifestError(
                f"{source}: feature {feature.name!r} has shape {dims}; an Example feature is one "
                "value or a flat list"
            )
        return ([] if dims in ([], [1]) else dims), False
    if feature.HasField("value_count"):
        low, high = feature.value_count.min, feature.value_count.max
        if high == 1:
            return [], low == 0
        if low == high and high > 1:
            return [high], False
        return None, low == 0
    return None, True


def _tagged(feature, source: str, prefix: str, what: str, valid: Callable[[Any], bool]) -> Any:
    """The JSON value an annotation tag of ours holds after `prefix` (None: no such tag).

    Raises:
      ManifestError: naming the file, feature and tag, when the value is not `valid` (`what`).
    """
    for tag in feature.annotation.tag:
        if tag.startswith(prefix):
            try:
                value = json.loads(tag.removeprefix(prefix))
            except ValueError:
                value = None
            if not valid(value):
                raise ManifestError(
                    f"{source}: feature {feature.name!r}: the tag {tag!r} does not hold {what}"
                )
            return value
    return None


def _markers(feature, source: str) -> list[str] | None:
    """The missing-value markers an annotation tag of ours lists (None: none)."""
    return _tagged(
        feature,
        source,
        _MARKERS_TAG,
        "a JSON list of texts",
        lambda v: isinstance(v, list) and all(isinstance(m, str) for m in v),
    )


def _unit(feature, source: str) -> str | None:
    """The unit an annotation tag of ours names (None: none)."""
    return _tagged(feature, source, _UNIT_TAG, "a JSON text", lambda v: isinstance(v, str))


def schema_from_pbtxt(text: str | bytes, source: str = "schema") -> list[FeatureSpec]:
    """The feature specs of a text-format TFMD `Schema` (TFDV's, or one we wrote).

    Raises:
      ManifestError: naming the file and feature, for text that is not a Schema or a feature
        no Example can hold (a struct, a multi-dimensional shape).
    """
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    try:
        text_format.Parse(text if isinstance(text, str) else text.decode("utf-8"), schema)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise ManifestError(
            f"{source}: not a JSON schema nor a text-format TFMD Schema: {e}"
        ) from e
    specs = []
    for feature in schema.feature:
        stage = schema_pb2.LifecycleStage.Name(feature.lifecycle_stage)
        if feature.deprecated or stage in _NOT_IN_DATA:
            continue
        type_name = schema_pb2.FeatureType.Name(feature.type)
        dtype = {v: k for k, v in _TYPES.items()}.get(type_name)
        if dtype is None:
            raise ManifestError(
                f"{source}: feature {feature.name!r} has type {type_name}; Example features are "
                "INT, FLOAT or BYTES"
            )
        shape, may_lack = _shape(feature, source)
        required = feature.presence.min_fraction >= 1.0 and not may_lack
        tags = [t.removeprefix(_TAG) for t in feature.annotation.tag if t.startswith(_TAG)]
        logical = tags[0] if tags else None
        if logical is None and dtype == "int64" and feature.HasField("time_domain"):
            formats = {v: k for k, v in _TIME_FORMATS.items()}
            name = schema_pb2.TimeDomain.IntegerTimeFormat.Name(feature.time_domain.integer_format)
            logical = formats.get(name)
        markers, unit = _markers(feature, source), _unit(feature, source)
        try:
            specs.append(
                FeatureSpec(feature.name, dtype, shape, not required, logical, markers, unit)
            )
        except ManifestError as e:
            raise ManifestError(f"{source}: {e}") from e
    return specs
