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
import logging
import os
import posixpath
import re
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv

from beam_jobs.codec.examples import VALUE_TYPES
from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.errors import DataError, UsageError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.base import InputFormat, OnBadRow, ReadSettings, Sample
from beam_jobs.formats.compressed import open_input
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.schema.conform import conform, infer_from_table
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "BASE_FEATURES",
    "IMAGE_EXTENSIONS",
    "ImagesFormat",
    "image_root",
    "inspect_image",
    "relative_name",
]

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


_log = logging.getLogger(__name__)
_ADDRESS = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")


@dataclasses.dataclass(frozen=True)
class _Labels:
    """A labels CSV, read: label names by id, each image's row (label id and extra columns) by
    its name relative to the image root, and the extra columns' features."""

    vocabulary: tuple[str, ...]
    rows: dict[str, dict[str, Any]]
    extra: tuple[FeatureSpec, ...]


def _load_labels(path: str, root: str) -> tuple[_Labels, dict[str, int]]:
    """The labels CSV read, and the line each image's row is on.

    Raises:
      UsageError: when the file cannot be read.
      DataError: for missing columns, unsafe names, or an image named twice with two rows.
    """
    try:
        with open_input(path) as f:
            options = pcsv.ConvertOptions(strings_can_be_null=True)
            table = pcsv.read_csv(f, convert_options=options)
    except OSError as e:
        raise UsageError(f"--labels {path}: cannot be read: {e}") from None
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
            f"{root} ('..'): {shown}"
        )
    labels = table.column("label")
    vocabulary: list[str] = []
    if pa.types.is_integer(labels.type) and labels.null_count == 0:
        ids = labels.to_pylist()
    else:
        text = labels.cast(pa.string()).to_pylist()
        vocabulary = sorted({t for t in text if t is not None})
        index = {t: i for i, t in enumerate(vocabulary)}
        ids = [index.get(t) for t in text]
    extra = table.drop_columns(["filename", "label"])
    base = {b.name for b in BASE_FEATURES}
    features = tuple(f for f in infer_from_table(extra) if f.name not in base)
    extra_rows = extra.select([f.name for f in features]).to_pylist()
    rows: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    twice = []
    for line, (name, label, cells) in enumerate(zip(names, ids, extra_rows, strict=True), 2):
        key, row = posixpath.normpath(name), {"label": label, **cells}
        if key in rows:
            if rows[key] != row:  # the same row twice is harmless; two labels are not
                twice.append(f"{name!r} on lines {lines[key]} and {line}")
            continue
        rows[key], lines[key] = row, line
    if twice:
        raise DataError(
            f"{path}: {len(twice)} image(s) are named twice with different rows ("
            f"{'; '.join(twice[:3])}{'; ...' if len(twice) > 3 else ''}): which label is meant? "
            "keep one row per image"
        )
    return _Labels(tuple(vocabulary), rows, features), lines


def _warn_unlisted(
    path: str, labels: _Labels, lines: dict[str, int], files: Sequence[InputFile], root: str
) -> None:
    """Rows of the labels CSV that name no input image: said at plan time (a typo, or an
    image not copied), as they convert to nothing."""
    listed = {posixpath.normpath(relative_name(f.path, root)) for f in files}
    unlisted = sorted((lines[k], k) for k in labels.rows if k not in listed)
    if unlisted:
        shown = "; ".join(f"line {line}: {name!r}" for line, name in unlisted[:3])
        _log.warning(
            "%s: %d row(s) name images that are not among the inputs (%s%s); they convert to "
            "nothing: check the names, relative to %s",
            path,
            len(unlisted),
            shown,
            "; ..." if len(unlisted) > 3 else "",
            root,
        )


@dataclasses.dataclass(frozen=True)
class ImagesFormat(InputFormat):
    """`root`: the folder image names are relative to; `labels_path`: `--image_labels`, read
    into `labels`; without it each image's parent folder is its label (`folders`, sorted)."""

    name = "images"
    extensions = IMAGE_EXTENSIONS

    root: str = "."
    labels_path: str | None = None
    labels: _Labels = _Labels((), {}, ())

    @classmethod
    def select(cls, files: Sequence[InputFile]) -> list[InputFile]:
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
        return images

    @classmethod
    def prepare(cls, files: Sequence[InputFile], settings: ReadSettings) -> ImagesFormat:
        root = image_root(settings.patterns)
        if settings.image_labels:
            labels, lines = _load_labels(settings.image_labels, root)
            _warn_unlisted(settings.image_labels, labels, lines, files, root)
        else:
            folders = sorted({posixpath.basename(posixpath.dirname(f.path)) for f in files})
            labels = _Labels(tuple(folders), {}, ())
        return cls(settings.kept, settings.max_record_bytes, root, settings.image_labels, labels)

    @property
    def label_vocabulary(self) -> tuple[str, ...]:
        return self.labels.vocabulary

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        return [dataclasses.replace(f, cuts=()) for f in files]

    def _record(self, path: str, data: bytes) -> dict[str, Any]:
        """One image's record; raises ValueError saying why it cannot be converted."""
        name = relative_name(path, self.root)
        if self.labels_path:
            row = self.labels.rows.get(posixpath.normpath(name))
            if row is None:
                raise ValueError(f"no row for {name!r} in {self.labels_path}")
        else:
            folder = posixpath.basename(posixpath.dirname(path))
            row = {"label": self.labels.vocabulary.index(folder)}
        height, width, channels = inspect_image(data)
        return {
            "image": data,
            "filename": name.encode("utf-8"),
            "height": height,
            "width": width,
            "channels": channels,
            **row,
        }

    def _batch(
        self, records: list[dict[str, Any]], features: Sequence[FeatureSpec]
    ) -> pa.RecordBatch:
        table = pa.Table.from_pylist(
            records,
            schema=pa.schema([(f.name, VALUE_TYPES[f.dtype]) for f in features]),
        )
        return conform(table, features)[0]

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
        return [by_name.get(f.name, f) for f in (*BASE_FEATURES, *self.labels.extra)]

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
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        with open_input(piece.path) as stream:
            data = stream.read()
        try:
            record = self._record(piece.path, data)
        except ValueError as e:
            raw = {"filename": relative_name(piece.path, self.root), "bytes": len(data)}
            on_bad_row(BadRow(piece.path, 0, len(data), str(e), None, raw))
            return
        yield self._batch([record], features)
