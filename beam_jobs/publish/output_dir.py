"""The output folder's rules: what in it is ours, what a new run may remove, and rerun detection.

Ours, and so ours to replace or remove: `manifest.json` (when it loads as a manifest), the
lease file, shard files named `<prefix>-NNNNN-of-NNNNN[.gN].tfrecord[.gz]`,
`dead_letter/<shard name>.jsonl`, temporary folders `.tfrecord-etl-tmp-<run id>/` that hold our
run marker, and the companion files (`schema.pbtxt`, `statistics.pb`, `dataset_info.json`,
`features.json`) when the folder also holds our manifest or a run's temporary folder: those
names are common, and a folder without either is not ours. Anything else (a user's
`dead_letter/notes.txt`, a folder that only looks like ours) is never deleted, with or without
`--overwrite`; without it, such files make the output a usage error, and a user's file under
our manifest's or a companion's name is one even with it (the conversion would write over it).

A rerun of the same conversion (same input files, sizes and options) into an output with its
complete manifest (every shard and companion file as it lists them) is a no-op, so a retried
scheduled launch is harmless. Work folders that failed runs kept are the launcher's to reuse or
remove (`job.resume`), once it holds the folder's lease.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.bad_rows import DEAD_LETTER_DIR
from beam_jobs.core.errors import UsageError
from beam_jobs.core.paths import is_local
from beam_jobs.publish.companions import COMPANION_NAMES, companion_mismatches
from beam_jobs.publish.lease import LEASE_NAME
from beam_jobs.sink.temp_folder import (
    RUN_MARKER,
    holds_our_marker,
    is_temp_folder_name,
)
from tfdata_reader.manifest import (
    MANIFEST_NAME,
    FeatureSpec,
    Manifest,
    ManifestError,
    shard_prefix_of,
)

__all__ = [
    "is_ours",
    "load_manifest",
    "ours_to_remove",
    "prepare_output",
]


_log = logging.getLogger(__name__)


def load_manifest(output: str) -> Manifest:
    """Reads `OUT/manifest.json` with Beam's file systems (local or gs://).

    Raises:
      ManifestError: when it is missing or malformed, naming the path.
    """
    path = FileSystems.join(output.rstrip("/"), MANIFEST_NAME)
    if not FileSystems.exists(path):
        raise ManifestError(
            f"{path} does not exist: not a tfrecord-etl output, or the conversion did not finish"
        )
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return Manifest.from_json(f.read(), source=path)


def _is_dead_letter(relative: str) -> bool:
    folder, _, name = relative.partition("/")
    return (
        folder == DEAD_LETTER_DIR
        and name.endswith(".jsonl")
        and shard_prefix_of(name[: -len(".jsonl")]) is not None
    )


def is_ours(relative: str, companions: bool = True) -> bool:
    """True for a path (relative to the output folder) that tfrecord-etl writes there;
    companion file names count only with `companions` (the folder holds our manifest or a
    run's temporary folder)."""
    top = relative.split("/", 1)[0]
    return (
        relative in (MANIFEST_NAME, LEASE_NAME)
        or (companions and relative in COMPANION_NAMES)
        or shard_prefix_of(relative) is not None
        or _is_dead_letter(relative)
        or is_temp_folder_name(top)
    )


def _listing(output: str) -> dict[str, int]:
    """Every file below `output`, relative to it, with its size (one recursive listing)."""
    found = FileSystems.match([FileSystems.join(output, "**")])[0].metadata_list
    prefix = output.rstrip("/") + "/"
    return dict(
        sorted((m.path[len(prefix) :], m.size_in_bytes) for m in found if m.path.startswith(prefix))
    )


def _files_in_place(output: str, manifest: Manifest, listing: dict[str, int]) -> bool:
    """Whether every shard the manifest lists is there with its recorded size, and every
    companion file with its size and CRC32C: a dataset with a shard deleted or cut short, or
    companions a failed publish rewrote, no longer holds the conversion its manifest says."""
    if not all(listing.get(shard.path) == shard.bytes for shard in manifest.shards):
        return False
    return all(
        listing.get(c.path) == c.bytes and not companion_mismatches(output, c)
        for c in manifest.companions
    )


def ours_to_remove(output: str, keep: set[str], prefixes: set[str]) -> list[str]:
    """Full paths of shard and dead-letter files with our names and one of `prefixes` that
    `keep` (the new manifest's files) does not list: earlier conversions' and failed runs'."""
    found = []
    for relative in _listing(output):
        name = relative.removeprefix(f"{DEAD_LETTER_DIR}/").removesuffix(".jsonl")
        ours = (shard_prefix_of(relative) or "") in prefixes or (
            _is_dead_letter(relative) and shard_prefix_of(name) in prefixes
        )
        if ours and relative not in keep:
            found.append(FileSystems.join(output, relative))
    return found


def _same_features(published: Sequence[FeatureSpec], planned: Sequence[FeatureSpec]) -> bool:
    """The planned features are those published. A feature the plan saw no missing value of
    may have been published nullable: the writers found one (an empty list, say) past the
    sample; that is the same conversion, not another."""
    return len(published) == len(planned) and all(
        dataclasses.replace(p, nullable=q.nullable) == q and (p.nullable or not q.nullable)
        for p, q in zip(published, planned, strict=True)
    )


def _same_conversion(
    manifest: Manifest,
    options: dict[str, Any],
    files: list[dict[str, Any]],
    features: Sequence[FeatureSpec] | None,
) -> bool:
    if features is not None and not _same_features(manifest.features, features):
        return False
    recorded = _deciding(manifest.options)
    return manifest.inputs.get("files") == files and all(
        recorded.get(k) == v for k, v in _deciding(options).items()
    )


def _deciding(options: dict[str, Any]) -> dict[str, Any]:
    """The options that decide the bytes: the GZIP level only with GZIP (an earlier version
    recorded level 1 for uncompressed shards too, now null: the same conversion)."""
    if options.get("compression") == "gzip":
        return options
    return {k: v for k, v in options.items() if k != "compression_level"}


def _is_file(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(path)
    matched = FileSystems.match([path])[0].metadata_list
    return any(m.path.rstrip("/") == path.rstrip("/") for m in matched)


def _our_temp_folders(output: str, listing: dict[str, int]) -> list[str]:
    """Work folders of ours (they hold our marker for their id); any other folder named like
    one is not provably ours and stays."""
    folders = {r.split("/", 1)[0] for r in listing if is_temp_folder_name(r.split("/", 1)[0])}
    ours = []
    for folder in sorted(folders):
        if f"{folder}/{RUN_MARKER}" in listing and holds_our_marker(output, folder):
            ours.append(folder)
        else:
            _log.warning("leaving %s in place: it does not hold a tfrecord-etl run marker", folder)
    return ours


def prepare_output(
    output: str,
    options: dict[str, Any],
    files: list[dict[str, Any]],
    overwrite: bool,
    features: Sequence[FeatureSpec] | None = None,
) -> bool:
    """Checks and tidies the output folder; the caller holds its lease.

    Args:
      output: the output folder.
      options: the conversion's options as the manifest records them.
      files: the listed inputs as the manifest records them (`[{"path", "bytes"}]`).
      overwrite: `--overwrite`.
      features: the planned feature spec; when given, a manifest with other features is another
        conversion (an edited --schema file under the same path).

    Returns:
      True when the output already holds a complete manifest of this very conversion, so there
      is nothing to do.

    Raises:
      UsageError: when the output is a file, holds files we did not write (without
        `--overwrite`), or holds a `manifest.json` that is not ours, or companion names
        without our manifest (with `--overwrite` too: publishing would write over them).
    """
    if _is_file(output):
        raise UsageError(f"--output {output} is a file; give a directory")
    listing = _listing(output)
    work = _our_temp_folders(output, listing)  # failed runs' kept work (`job.resume`)
    manifest, problem = None, ""
    if MANIFEST_NAME in listing:
        try:
            manifest = load_manifest(output)
        except ManifestError as e:
            problem = str(e)
    if problem:
        # Written atomically, ours always loads: this one is somebody else's (or was edited).
        raise UsageError(
            f"--output {output} holds a manifest.json that is not a tfrecord-etl manifest "
            f"({problem}); a conversion would write over it: move it or choose another directory"
        )
    # Companion names are common ones: they are ours beside our manifest, or after a run of
    # ours that died publishing (its work folder is still there).
    companions_ours = manifest is not None or bool(work)
    clashing = [r for r in COMPANION_NAMES if r in listing and not companions_ours]
    if clashing:
        raise UsageError(
            f"--output {output} holds {', '.join(clashing)}, which a conversion writes beside "
            "its shards, but no tfrecord-etl manifest: they are not ours to write over; move "
            "them or choose another directory"
        )
    if (
        manifest
        and not overwrite
        and _same_conversion(manifest, options, files, features)
        and _files_in_place(output, manifest, listing)
    ):
        return True
    foreign = [r for r in listing if not is_ours(r)]
    if foreign and not overwrite:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise UsageError(
            f"--output {output} holds files tfrecord-etl did not write ({shown}); choose an empty "
            "or new directory, or pass --overwrite (files that are not tfrecord-etl's own are "
            "never deleted)"
        )
    return False
