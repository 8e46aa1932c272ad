"""Batches of serialized Examples parsed: the `tf.io.parse_example` spec of a manifest's
features, the label split off (a text label as its vocabulary id, a missing one dense), and
one-value features that may be missing filled, for Keras."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from tfdata_reader.images import image_decoder
from tfdata_reader.manifest import FeatureSpec, Manifest
from tfdata_reader.options import ReadOptions

__all__ = [
    "fill_values",
    "missing_label",
    "parse_spec",
    "parser",
    "text_label_vocabulary",
    "with_manifest_label",
]

_TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}


def parse_spec(
    features: Sequence[FeatureSpec],
) -> dict[str, tf.io.FixedLenFeature | tf.io.RaggedFeature]:
    """`tf.io.parse_example` features: dense for fixed-length, ragged for the rest.

    A nullable feature is ragged even when it has one value per record, because a missing value
    is a record with zero values, which a dense tensor cannot show.
    """
    return {
        f.name: tf.io.FixedLenFeature(f.shape, _TF_DTYPES[f.dtype])
        if f.is_fixed
        else tf.io.RaggedFeature(_TF_DTYPES[f.dtype], row_splits_dtype=tf.int64)
        for f in features
    }


def with_manifest_label(options: ReadOptions, manifest: Manifest) -> ReadOptions:
    """`label_key` None takes the label the manifest names (`convert --label`); "" is none."""
    if options.label_key is None and manifest.label:
        return dataclasses.replace(options, label_key=manifest.label)
    if options.label_key == "":
        return dataclasses.replace(options, label_key=None)
    return options


def text_label_vocabulary(manifest: Manifest, options: ReadOptions) -> list[str] | None:
    """The vocabulary that maps a text label to ids, when the label is text and has one."""
    by_name = {f.name: f for f in manifest.features}
    label = by_name.get(options.label_key or "")
    if label is None or label.dtype != "bytes" or not manifest.label_vocabulary:
        return None
    return manifest.label_vocabulary


def _label_ids(vocabulary: list[str]):
    """Text labels -> their ids in the vocabulary (-1 for a missing or unknown one)."""
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([v.encode("utf-8") for v in vocabulary], tf.string),
            tf.range(len(vocabulary), dtype=tf.int64),
        ),
        default_value=-1,
    )

    def ids(label):
        if isinstance(label, tf.RaggedTensor):  # a nullable label: missing is an empty row
            label = label.to_tensor(default_value=b"", shape=[None, 1])[:, 0]
        return table.lookup(label)

    return ids


def missing_label(manifest: Manifest, options: ReadOptions) -> float | int | None:
    """What a missing value of a number label becomes, so that labels come dense, one per
    record, as Keras wants them: -1 (int64, like a text label's id) or NaN (float32). None
    for labels that are never missing, lists, or text."""
    by_name = {f.name: f for f in manifest.features}
    label = by_name.get(options.label_key or "")
    if label is None or label.shape != [] or not label.nullable or label.dtype == "bytes":
        return None
    return -1 if label.dtype == "int64" else float("nan")


_FILL_DEFAULTS: dict[str, int | float | bytes] = {"int64": 0, "float32": 0.0, "bytes": b""}
_FILL_TYPES = {"int64": (int,), "float32": (int, float), "bytes": (str, bytes)}


def fill_values(
    features: Sequence[FeatureSpec], options: ReadOptions
) -> dict[str, int | float | bytes]:
    """{feature: value for a missing one} of the one-value features that come dense although
    they may be missing (`fill_missing`, `ragged=False`); pure.

    Raises:
      ValueError: for a feature that is not read, a list feature, or a value of another type.
    """
    by_name = {f.name: f for f in features}
    fills: dict[str, int | float | bytes] = {}
    if not options.ragged:
        fills = {f.name: _FILL_DEFAULTS[f.dtype] for f in features if f.shape == [] and f.nullable}
    for name, value in (options.fill_missing or {}).items():
        feature = by_name.get(name)
        if feature is None:
            raise ValueError(
                f"fill_missing: {name!r} is not a feature read; read: {sorted(by_name)}"
            )
        if feature.shape != []:
            raise ValueError(
                f"fill_missing: {name!r} holds a list of values per record (shape "
                f"{feature.shape}); only one-value features can be filled"
            )
        if isinstance(value, bool) or not isinstance(value, _FILL_TYPES[feature.dtype]):
            raise ValueError(
                f"fill_missing: {name!r} is {feature.dtype}; {value!r} is not a value of it"
            )
        if feature.nullable:
            fills[name] = value.encode() if isinstance(value, str) else value
    return fills


def _dense(values: tf.RaggedTensor, default: int | float | bytes) -> tf.Tensor:
    """One value per record, `default` where a record has none."""
    return values.to_tensor(default_value=tf.constant(default, values.dtype), shape=[None, 1])[:, 0]


def parser(
    spec: dict[str, Any],
    options: ReadOptions,
    has_image: bool,
    vocabulary: list[str] | None,
    missing_label: int | float | bytes | None = None,
    fills: Mapping[str, int | float | bytes] | None = None,
):
    """Batches of serialized records -> parsed features (images decoded), label split off
    (a text label as its id in `vocabulary`; a number label that may be missing, dense with
    `missing_label` where it is), features in `fills` dense with their value where missing."""
    label_key = options.label_key
    decode = None
    if options.decode_images and has_image:
        decode = image_decoder(options.image_size, options.image_channels)
    to_ids = _label_ids(vocabulary) if vocabulary else None
    fills = dict(fills or {})
    if label_key is not None and label_key in fills and to_ids is None:
        missing_label = fills[label_key]
    if label_key is not None:
        fills.pop(label_key, None)

    def parse(records: tf.Tensor):
        parsed = tf.io.parse_example(records, spec)
        if decode is not None:
            parsed["image"] = decode(parsed["image"])
        for name, default in fills.items():
            parsed[name] = _dense(parsed[name], default)
        if label_key is None:
            return parsed
        label = parsed.pop(label_key)
        if to_ids is not None:
            return parsed, to_ids(label)
        if missing_label is not None and isinstance(label, tf.RaggedTensor):
            label = _dense(label, missing_label)
        return parsed, label

    return parse
