"""How the contract names files: shard names (prefix, index, count, generation, compression),
the `Compression` of a dataset's shards, and paths relative to the dataset folder (pure)."""

from __future__ import annotations

import enum
import re
from typing import Self

from tfdata_reader.errors import ManifestError

__all__ = [
    "COMPRESSIONS",
    "NAME_RULE",
    "Choice",
    "Compression",
    "check_relative_path",
    "is_valid_name",
    "shard_name",
    "shard_prefix_of",
    "with_generation",
    "without_generation",
]


class Choice(str, enum.Enum):
    """A flag's and a manifest field's values: printed as their text, parsed naming them."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> Self:
        """One of the values; ValueError naming the choices."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(c.value for c in cls)
            raise ValueError(f"must be one of {choices}, got {text!r}") from None


class Compression(Choice):
    """How a dataset's shards are stored, as its manifest records it (`"none"`, `"gzip"`),
    with the file suffix of its shards and the name TensorFlow's readers take."""

    NONE = "none"
    GZIP = "gzip"

    @property
    def suffix(self) -> str:
        """The shard file suffix: `.tfrecord` or `.tfrecord.gz`."""
        return ".tfrecord.gz" if self is Compression.GZIP else ".tfrecord"

    @property
    def tf_name(self) -> str:
        """`compression_type` as `tf.data.TFRecordDataset` takes it: "" or "GZIP"."""
        return "GZIP" if self is Compression.GZIP else ""


COMPRESSIONS = tuple(c.value for c in Compression)

# Shard prefixes and split names: ASCII, so every file system and URL takes them as they are.
_NAME_RE = re.compile(r"^[A-Za-z0-9_.]+$")
NAME_RULE = "ASCII letters, digits, '_' and '.'"
# prefix-INDEX-of-COUNT[.gGENERATION].tfrecord[.gz]; the generation tells apart the shards of
# successive conversions into one folder (none for the first), so a new conversion never writes
# over a file the current manifest lists.
_GENERATION_TAG = re.compile(r"\.g\d+(?=\.tfrecord)")  # in a shard name
_SHARD_NAME_RE = re.compile(r"^([A-Za-z0-9_.]+?)-\d{5,}-of-\d{5,}(\.g\d+)?\.tfrecord(\.gz)?$")


def is_valid_name(name: str) -> bool:
    """True for a shard prefix or split name: only ASCII letters, digits, '_' and '.'."""
    return bool(_NAME_RE.fullmatch(name))


def shard_prefix_of(name: str) -> str | None:
    """The prefix of a file name that `shard_name` could have made, else None."""
    match = _SHARD_NAME_RE.fullmatch(name)
    return match.group(1) if match else None


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
    return f"{prefix}-{index:05d}-of-{num_shards:05d}{tag}{Compression(compression).suffix}"


def with_generation(name: str, generation: int) -> str:
    """A generation-0 shard name as the same shard's name in `generation`."""
    if not generation:
        return name
    stem, dot, rest = name.partition(".tfrecord")
    return f"{stem}.g{generation}{dot}{rest}"


def without_generation(name: str) -> str:
    """A shard name with its generation tag taken out (`.g2`): the same shard in any
    generation."""
    return _GENERATION_TAG.sub("", name)
