"""`--format images`: image files with labels, one record per image.

A record holds the encoded image as it is (`image`), `filename` (relative to the image root),
`label` (int64), `height`, `width` and `channels` from the decoded image, and any extra columns
of the labels CSV. Labels come from `--labels labels.csv` (`filename`, `label`, extra columns)
or, without it, from each image's parent folder. String labels get stable integer ids (their
sorted order), and the manifest keeps that vocabulary. Every image is decoded once (Pillow) so
that a file that is not a decodable JPEG, PNG, GIF or BMP is dead-lettered, not written.
"""

from __future__ import annotations

import dataclasses
import io
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv

from beam_jobs.errors import DataError
from beam_jobs.formats.base import InputFormat, OnBadRow, Sample
from beam_jobs.formats.compressed import open_input
from beam_jobs.plan.shards import InputFile, Piece
from beam_jobs.schema import conform as arrow_conform
from beam_jobs.sink.dead_letter import BadRow
from tfdata_reader.manifest import FeatureSpec

__all__ = ["ImagesFormat"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")
_DECODABLE = {"JPEG", "PNG", "GIF", "BMP"}  # what tf.io.decode_image reads too
_CHANNELS = {"1": 1, "L": 1, "I": 1, "I;16": 1, "F": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}
BASE_FEATURES = (
    FeatureSpec("image", "bytes", []),
    FeatureSpec("filename", "bytes", []),
    FeatureSpec("label", "int64", []),
    FeatureSpec("height", "int64", []),
    FeatureSpec("width", "int64", []),
    FeatureSpec("channels", "int64", []),
)
_GLOB = set("*?[")


def image_root(patterns: Sequence[str]) -> str:
    """The folder image names are relative to: the longest wildcard-free folder of the
    first `--input` pattern (the pattern itself when it names a folder)."""
    pattern = patterns[0].rstrip("/")
    parts = pattern.split("/")
    fixed = []
    for part in parts:
        if _GLOB & set(part):
            break
        fixed.append(part)
    if len(fixed) == len(parts) and posixpath.splitext(pattern)[1].lower() in IMAGE_EXTENSIONS:
        fixed = fixed[:-1]  # a single image file
    root = "/".join(fixed) or "."
    # Listed local files have absolute paths (see plan.inputs), so the root must too.
    return os.path.abspath(root) if "://" not in root else root


def relative_name(path: str, root: str) -> str:
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else posixpath.basename(path)


def _safe_name(name: str) -> bool:
    """False for a labels CSV name that could point outside the image root."""
    return bool(name) and not (
        name.startswith(("/", "\\"))
        or "\\" in name
        or ":" in name.split("/", 1)[0]  # C:..., gs://...
        or any(part == ".." for part in name.split("/"))
    )


def _channels(image: Any) -> int:
    if image.mode == "P":
        return 4 if "transparency" in image.info else 3
    return _CHANNELS.get(image.mode, len(image.getbands()))


def inspect_image(data: bytes) -> tuple[int, int, int]:
    """(height, width, channels) of an encoded image, decoding it fully.

    Raises:
      ValueError: when it is not a whole JPEG, PNG, GIF or BMP image.
    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format not in _DECODABLE:
                raise ValueError(f"{image.format} images are not supported")
            image.load()
            width, height = image.size
            return height, width, _channels(image)
    except ValueError:
        raise
    except Exception as e:  # PIL raises OSError, SyntaxError, Image.DecompressionBombError...
        # Pillow names the in-memory stream with its address ("<_io.BytesIO object at 0x7f..>"),
        # which would make the dead letter differ from run to run.
        reason = _ADDRESS.sub("the file", str(e))
        raise ValueError(f"not a decodable image: {reason}") from None


_ADDRESS = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")


class ImagesFormat(InputFormat):
    name = "images"
    extensions = IMAGE_EXTENSIONS

    def __init__(self, patterns: Sequence[str], labels: str | None = None) -> None:
        self._root = image_root(patterns)
        self._labels_path = labels
        self._vocabulary: list[str] = []
        self._rows: dict[str, dict[str, Any]] = {}  # relative name -> label and extra columns
        self._extra: list[FeatureSpec] = []

    def list_files(self, files: Sequence[InputFile]) -> list[InputFile]:
        images = [
            f
            for f in files
            if f.path.lower().endswith(IMAGE_EXTENSIONS)
            and not posixpath.basename(f.path).startswith(".")
        ]
        if not images:
            raise DataError(
                f"no image files ({', '.join(IMAGE_EXTENSIONS)}) among the {len(files)} inputs"
            )
        if self._labels_path:
            self._load_labels(self._labels_path)
        else:
            folders = {posixpath.basename(posixpath.dirname(f.path)) for f in images}
            self._vocabulary = sorted(folders)
        return images

    def _load_labels(self, path: str) -> None:
        with open_input(path) as f:
            table = pcsv.read_csv(f, convert_options=pcsv.ConvertOptions(strings_can_be_null=True))
        missing = {"filename", "label"} - set(table.column_names)
        if missing:
            raise DataError(
                f"{path}: needs the columns 'filename' and 'label', lacks {sorted(missing)} "
                f"(has {table.column_names})"
            )
        names = table.column("filename").cast(pa.string()).to_pylist()
        unsafe = [(i + 2, n) for i, n in enumerate(names) if not _safe_name(n or "")]
        if unsafe:
            shown = "; ".join(f"line {line}: {name!r}" for line, name in unsafe[:5])
            raise DataError(
                f"{path}: {len(unsafe)} filename(s) are empty, absolute or leave the image root "
                f"{self._root} ('..'): {shown}"
            )
        labels = table.column("label")
        if pa.types.is_integer(labels.type) and labels.null_count == 0:
            ids = labels.to_pylist()
        else:
            text = labels.cast(pa.string()).to_pylist()
            self._vocabulary = sorted({t for t in text if t is not None})
            index = {t: i for i, t in enumerate(self._vocabulary)}
            ids = [index.get(t) for t in text]
        extra = table.drop_columns(["filename", "label"])
        self._extra = [
            f
            for f in arrow_conform.infer_from_table(extra)
            if f.name not in {b.name for b in BASE_FEATURES}
        ]
        extra_rows = extra.select([f.name for f in self._extra]).to_pylist()
        for name, label, cells in zip(names, ids, extra_rows):
            self._rows[posixpath.normpath(name)] = {"label": label, **cells}

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        return [dataclasses.replace(f, cuts=()) for f in files]

    def _record(self, path: str, data: bytes) -> dict[str, Any]:
        """One image's record; raises ValueError saying why it cannot be converted."""
        name = relative_name(path, self._root)
        if self._labels_path:
            row = self._rows.get(posixpath.normpath(name))
            if row is None:
                raise ValueError(f"no row for {name!r} in {self._labels_path}")
        else:
            folder = posixpath.basename(posixpath.dirname(path))
            row = {"label": self._vocabulary.index(folder)}
        height, width, channels = inspect_image(data)
        return {
            "image": data,
            "filename": name.encode("utf-8"),
            "height": height,
            "width": width,
            "channels": channels,
            **row,
        }

    def _batch(self, records: list[dict], features: Sequence[FeatureSpec]) -> pa.RecordBatch:
        table = pa.Table.from_pylist(
            records,
            schema=pa.schema([(f.name, arrow_conform.VALUE_TYPES[f.dtype]) for f in features]),
        )
        return arrow_conform.conform(table, features)[0]

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        with open_input(f.path) as stream:
            data = stream.read()
        try:
            record = self._record(f.path, data)
        except ValueError:
            record = None  # reported by the writer; sizes come from the other samples
        return Sample(f.path, pa.table({}), f.size if record else 0, data=record)

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        by_name = {f.name: f for f in overrides}
        return [by_name.get(f.name, f) for f in (*BASE_FEATURES, *self._extra)]

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        if sample.data is not None:
            yield self._batch([sample.data], features)

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        context: Any = None,
    ) -> Iterator[pa.RecordBatch]:
        with open_input(piece.path) as stream:
            data = stream.read()
        try:
            record = self._record(piece.path, data)
        except ValueError as e:
            raw = {"filename": relative_name(piece.path, self._root), "bytes": len(data)}
            on_bad_row(BadRow(piece.path, 0, len(data), str(e), None, raw))
            return
        yield self._batch([record], features)

    def manifest_extras(self) -> dict[str, Any]:
        return {"label_vocabulary": self._vocabulary} if self._vocabulary else {}
