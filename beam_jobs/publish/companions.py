"""The files published beside the shards for other tools: TFX's view of the feature spec
(`schema.pbtxt`), TFDV's statistics (`statistics.pb`) and TFDS's `dataset_info.json` and
`features.json`. The manifest lists each with its size and CRC32C."""

from __future__ import annotations

from collections.abc import Sequence

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.tasks import WrittenShard
from beam_jobs.schema.tfds import TFDS_NAMES, tfds_files
from beam_jobs.schema.tfmd import SCHEMA_NAME, schema_pbtxt
from beam_jobs.stats.packed import merge_all
from beam_jobs.stats.proto import ALL_EXAMPLES, STATISTICS_NAME, statistics_list
from tfdata_reader.manifest import CompanionFile, Manifest

__all__ = ["COMPANION_NAMES", "companion_entries", "companion_files", "companion_mismatches"]

# Every name a companion file may have (a conversion writes those that apply to it).
COMPANION_NAMES = (SCHEMA_NAME, STATISTICS_NAME, *TFDS_NAMES)


def _statistics(written: Sequence[WrittenShard], manifest: Manifest) -> bytes:
    """`statistics.pb`: the shards' statistics merged per split, by shard index (a fixed order:
    the same conversion gives the same bytes)."""
    datasets = []
    names: list[str | None] = [*manifest.splits] or [None]
    for split in names:
        shards = sorted((w for w in written if w.split == split), key=lambda w: w.index)
        merged = merge_all(w.stats for w in shards)
        records = sum(w.records for w in shards)
        datasets.append((split or ALL_EXAMPLES, records, merged))
    return statistics_list(datasets, manifest.features).SerializeToString(deterministic=True)


def companion_files(written: Sequence[WrittenShard], manifest: Manifest) -> dict[str, bytes]:
    """The files published beside the shards: TFX's view of the spec (`schema.pbtxt`), the
    statistics, and TFDS's files (none for GZIP shards, which TFDS cannot read)."""
    texts = {
        SCHEMA_NAME: schema_pbtxt(manifest.features, manifest.label, manifest.label_vocabulary),
        **(tfds_files(manifest) or {}),
    }
    files = {name: text.encode("utf-8") for name, text in texts.items()}
    files[STATISTICS_NAME] = _statistics(written, manifest)
    # In COMPANION_NAMES's order, as the manifest lists them.
    return {name: files[name] for name in COMPANION_NAMES if name in files}


def companion_entries(files: dict[str, bytes]) -> list[CompanionFile]:
    """The manifest's entries of the companion files: size and CRC32C, so that a copy a failed
    publish leaves behind is told apart from the one the manifest describes."""
    return [
        CompanionFile(name, len(data), f"{google_crc32c.value(data):08x}")
        for name, data in files.items()
    ]


def companion_mismatches(output: str, companion: CompanionFile) -> list[str]:
    """How a companion file as stored differs from its manifest entry: ["missing"], its
    size's and CRC32C's differences, or [] when it is the file the manifest published."""
    path = FileSystems.join(output, companion.path)
    if not FileSystems.exists(path):
        return ["missing"]
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        data = f.read()  # a few files of kilobytes to megabytes
    return companion.mismatches(size=len(data), crc32c=google_crc32c.value(data))
