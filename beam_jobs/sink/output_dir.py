"""Deciding what to do with the output directory before a conversion writes anything.

A rerun of the same conversion (same input files and sizes, same options) into an output with a
complete manifest is a no-op, so a retried scheduled launch is harmless. A directory holding
files tfrecord-etl did not write is refused unless `--overwrite`, and even then only our own
files are ever replaced or deleted. Temporary folders left by killed runs are removed.
"""

from __future__ import annotations

import re

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.errors import UsageError
from beam_jobs.options import ConvertConfig
from beam_jobs.sink.dead_letter import DEAD_LETTER_DIR
from tfdata_reader.manifest import MANIFEST_NAME, Manifest, ManifestError, shard_prefix_of

__all__ = ["TEMP_DIR_PREFIX", "is_ours", "load_manifest", "prepare_output", "remove_folder"]

TEMP_DIR_PREFIX = ".tfrecord-etl-tmp-"  # + a run id; where shards are written before publishing
_TEMP_DIR_RE = re.compile(rf"^{re.escape(TEMP_DIR_PREFIX)}[0-9a-f]+$")


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


def remove_folder(path: str) -> None:
    """Deletes a folder and everything below it, on any file system.

    On GCS a folder is only a name prefix (it never "exists" by itself), so what decides is
    whether anything is listed below it.
    """
    path = path.rstrip("/")
    if FileSystems.get_scheme(path) in (None, "file"):  # a local path
        if FileSystems.exists(path):
            FileSystems.delete([path])  # the whole tree
    elif FileSystems.match([path + "/**"])[0].metadata_list:
        FileSystems.delete([path + "/"])  # every object under the prefix


def is_ours(name: str) -> bool:
    """True for a name tfrecord-etl writes in an output directory."""
    return (
        name in (MANIFEST_NAME, DEAD_LETTER_DIR)
        or shard_prefix_of(name) is not None
        or bool(_TEMP_DIR_RE.match(name))
    )


def _entries(output: str) -> dict[str, str]:
    """Top-level names in `output` -> one full path under each (files and folders alike)."""
    found = FileSystems.match([FileSystems.join(output, "**")])[0].metadata_list
    prefix = output.rstrip("/") + "/"
    names: dict[str, str] = {}
    for meta in found:
        if meta.path.startswith(prefix):
            names.setdefault(meta.path[len(prefix) :].split("/", 1)[0], meta.path)
    return names


def _same_conversion(manifest: Manifest, config: ConvertConfig, files: list[dict]) -> bool:
    return manifest.inputs.get("files") == files and all(
        manifest.options.get(k) == v for k, v in config.to_json().items()
    )


def prepare_output(config: ConvertConfig, files: list[dict]) -> bool:
    """Checks and tidies the output directory.

    Args:
      config: the conversion's settings.
      files: the listed inputs as recorded in the manifest (`[{"path", "bytes"}]`).

    Returns:
      True when the output already holds a complete manifest of this very conversion, so there
      is nothing to do.

    Raises:
      UsageError: when the output is a file, or holds files we did not write (without
        `--overwrite`).
    """
    output, overwrite = config.output, config.overwrite
    entries = _entries(output)  # one recursive listing (on GCS a folder has no object itself)
    if not entries and _is_file(output):
        raise UsageError(f"--output {output} is a file; give a directory")
    if MANIFEST_NAME in entries and not overwrite:
        try:
            manifest = load_manifest(output)
        except ManifestError:
            manifest = None
        if manifest and _same_conversion(manifest, config, files):
            return True
    foreign = sorted(name for name in entries if not is_ours(name))
    if foreign and not overwrite:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise UsageError(
            f"--output {output} holds files tfrecord-etl did not write ({shown}); choose an empty "
            "or new directory, or pass --overwrite (only tfrecord-etl's own files are replaced)"
        )
    # Temporary folders of killed runs (one output is written by one run at a time).
    for name in entries:
        if name.startswith(TEMP_DIR_PREFIX):
            remove_folder(FileSystems.join(output, name))
    return False


def _is_file(path: str) -> bool:
    matched = FileSystems.match([path])[0].metadata_list
    return any(m.path.rstrip("/") == path.rstrip("/") for m in matched)
