"""A conversion that did not publish leaves its finished work; running the same command again
reuses it.

The launcher names the work folder after the conversion (`WorkKey`: a digest of what decides
the bytes: the tool's version, the input files with their sizes and modification times, the
options that decide the bytes, the feature spec and the plan's tasks), so a rerun of the same
command finds it and takes it over (`open_work`): its marker then names the new run (tasks of
the old one still running stop), the files of tasks that never finished are removed, and each
task checks its own record and files before it reuses them (`sink.commits`). Options that do
not change the bytes (`--max_bad_fraction`, workers, runner, progress, the stall limit) may
differ. Anything else (an input changed, another seed, other flags, `--fresh`) starts from the
beginning, saying why in one line; a kept folder of another conversion is removed then (after
undoing a publishing it left half done: `publish.journal.roll_back`). A publishing that was
stopped half way is finished first (`finish_publishing`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core.paths import is_missing
from beam_jobs.core.units import count_of, format_size
from beam_jobs.core.version import __version__
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.plan.conversion import ConversionPlan
from beam_jobs.publish import journal
from beam_jobs.publish.output_dir import load_manifest
from beam_jobs.sink import commits
from beam_jobs.sink.progress import NOTES_DIR
from beam_jobs.sink.run_files import create_run_file
from beam_jobs.sink.temp_folder import (
    HELD_SECONDS,
    RUN_MARKER,
    TEMP_DIR_PREFIX,
    is_temp_folder_name,
    mark_stopped,
    read_marker,
    remove_folder,
    start_temp_folder,
)
from tfdata_reader.manifest import Manifest, ManifestError

__all__ = [
    "KeptWork",
    "Work",
    "WorkKey",
    "discard_all",
    "finish_publishing",
    "keep_on_failure",
    "kept_as_is",
    "kept_counts",
    "open_work",
    "why_not",
    "work_key",
]

# Recorded options that do not change a shard's bytes: a rerun may change them and resume.
NOT_DECIDING = frozenset({"max_bad_fraction"})
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WorkKey:
    """What a conversion is, as far as its bytes go (`parts`), and the work folder named
    after it."""

    parts: Mapping[str, Any]

    @property
    def digest(self) -> str:
        text = json.dumps(self.parts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def work(self) -> str:
        """The work folder's id: `.tfrecord-etl-tmp-<work>`."""
        return self.digest[:16]


def work_key(config: ConvertConfig, plan: ConversionPlan) -> WorkKey:
    """The key of a planned conversion: the tool's version, the input files (path, size,
    modification time), the options that decide the bytes, the features and the plan (a
    digest of its tasks, shuffle, formats and settings: their dataclasses' text)."""
    sharding = dataclasses.replace(plan.sharding, max_bad_fraction=0.0)
    planned = (
        plan.tasks,
        plan.shuffle,
        plan.input_format,
        plan.read_features,
        plan.projection,
        sharding,
        plan.splits,
        plan.split_key,
        plan.max_record_bytes,
        plan.label,
    )
    options = {k: v for k, v in config.to_json().items() if k not in NOT_DECIDING}
    return WorkKey(
        {
            "tool": __version__,
            "inputs": plan.files_json(),
            "options": options,
            "features": [f.to_json() for f in plan.features],
            "plan": hashlib.sha256(repr(planned).encode("utf-8")).hexdigest(),
        }
    )


def why_not(kept: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> str:
    """Why a kept folder's conversion (`kept`: its key's parts) is not the one wanted, in a
    few words."""
    if not kept:
        return "it was left by an earlier version of tfrecord-etl"
    if kept.get("tool") != wanted["tool"]:
        return f"it was made by tfrecord-etl {kept.get('tool')}, this is {wanted['tool']}"
    if kept.get("inputs") != wanted["inputs"]:
        return _inputs_differ(kept.get("inputs") or [], wanted["inputs"])
    before, now = kept.get("options") or {}, wanted["options"]
    changed = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
    if changed:
        first = changed[0]
        more = f" (and {count_of(len(changed) - 1, 'other option')})" if len(changed) > 1 else ""
        return f"--{first} was {_shown(before.get(first))}, now {_shown(now.get(first))}{more}"
    if kept.get("features") != wanted["features"]:
        return "its feature spec differs (a --schema file changed, or what was sampled)"
    return "its plan differs"


def _shown(value: Any) -> str:
    return "not given" if value is None else json.dumps(value)


def _inputs_differ(kept: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> str:
    before = {f["path"]: f for f in kept}
    now = {f["path"]: f for f in wanted}
    found = []
    for path, file in now.items():
        old = before.get(path)
        if old is None:
            found.append(f"input {path} is new")
        elif old != file:
            found.append(
                f"input {path} changed ({old.get('bytes', 0):,} -> {file['bytes']:,} bytes, "
                f"modified {old.get('modified')} -> {file.get('modified')})"
            )
    found += [f"input {path} is gone" for path in before if path not in now]
    more = f" (and {count_of(len(found) - 1, 'other input')})" if len(found) > 1 else ""
    return found[0] + more if found else "its inputs differ"


@dataclasses.dataclass(frozen=True)
class Work:
    """The run's work folder: a failed run's taken over (`adopted`, holding `kept_tasks`
    finished tasks in `kept_bytes`), or a new one."""

    folder: str
    adopted: bool = False
    kept_bytes: int = 0
    kept_tasks: int = 0


@dataclasses.dataclass(frozen=True)
class KeptWork:
    """What a failed run leaves for the next: its work folder, its size, its finished tasks."""

    folder: str
    bytes: int
    tasks: int
    planned: int

    def describe(self) -> str:
        return (
            f"its finished work ({self.tasks:,} of {count_of(self.planned, 'task')}, "
            f"{format_size(self.bytes)}) is kept in {self.folder}: run the same command again "
            "to resume, or add --fresh to discard it"
        )


def _our_folders(output: str) -> dict[str, dict[str, Any]]:
    """Our work folders in the output (those holding our marker), by name, with their
    markers."""
    pattern = FileSystems.join(output, TEMP_DIR_PREFIX + "*", RUN_MARKER)
    try:
        found = FileSystems.match([pattern])[0].metadata_list
    except Exception:  # no output folder yet
        return {}
    prefix = output.rstrip("/") + "/"
    ours = {}
    for meta in found:
        name = meta.path.removeprefix(prefix).split("/", 1)[0]
        if not is_temp_folder_name(name) or meta.path != FileSystems.join(output, name, RUN_MARKER):
            continue
        marker = read_marker(FileSystems.join(output, name))
        if marker is not None and name.removeprefix(TEMP_DIR_PREFIX) in (
            marker.get("work"),
            marker.get("run_id"),
        ):
            ours[name] = marker
    return dict(sorted(ours.items()))


def _files(folder: str) -> dict[str, int]:
    """Every file below a folder with its size (one recursive listing)."""
    try:
        found = FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list
    except Exception:
        return {}
    return {m.path: m.size_in_bytes for m in found}


def _records(files: Mapping[str, int]) -> int:
    """The finished tasks (write tasks and units: what `Counts.tasks` counts) among a folder's
    files; the joins' records are not tasks."""
    done = f"/{commits.DONE_DIR}/"
    return sum(1 for path in files if done in path and commits.is_task_record(path))


KEY_NAME = "conversion.json"  # in a work folder: its conversion's key, for a rerun's reasons


def _write_key(folder: str, key: WorkKey) -> None:
    data = json.dumps(dict(key.parts), sort_keys=True).encode("utf-8")
    with create_run_file(FileSystems.join(folder, KEY_NAME)) as f:
        f.write(data)


def _read_key(folder: str) -> dict[str, Any] | None:
    """The key parts a work folder was made for (None: not recorded, an earlier version's)."""
    try:
        with FileSystems.open(
            FileSystems.join(folder, KEY_NAME), compression_type=CompressionTypes.UNCOMPRESSED
        ) as f:
            found = json.loads(f.read())
    except ValueError:
        return None
    except Exception as e:
        if isinstance(e, OSError) or is_missing(e):
            return None
        raise
    return found if isinstance(found, dict) else None


def finish_publishing(output: str, key: WorkKey) -> Manifest | None:
    """Finishes a publishing of this very conversion that a killed or stopped run left half
    done (its journal is there); returns the manifest it published (None: none was begun)."""
    folder = FileSystems.join(output, TEMP_DIR_PREFIX + key.work)
    marker = read_marker(folder)
    if marker is None or marker.get("key") != key.digest:
        return None
    begun = journal.load_journal(folder)
    if begun is None:
        return None
    try:
        published = load_manifest(output).fingerprint == begun.fingerprint
    except ManifestError:
        published = False
    # Until its manifest is in place, what it moves is checked (a file damaged while no run
    # held it); after, the dataset is published and only its tidying is left.
    bad = [] if published else journal.damaged(output, folder, begun)
    if bad:
        _log.warning(
            "the publishing a stopped run of this conversion began in %s is not finished: %s "
            "%s not as its manifest lists (size, CRC32C); its files go back to the work folder "
            "and the tasks whose files are damaged run again",
            folder,
            ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else ""),
            "is" if len(bad) == 1 else "are",
        )
        journal.put_back(output, folder, begun)
        return None
    _log.info(
        "finishing the publishing a stopped run of this conversion began in %s (%s)",
        folder,
        begun.fingerprint,
    )
    journal.finish(output, folder, begun)
    return load_manifest(output)


def discard_all(output: str) -> None:
    """Removes every work folder of ours (the output holds this very conversion already),
    undoing what another conversion's publishing left half done."""
    for name in _our_folders(output):
        folder = FileSystems.join(output, name)
        if journal.load_journal(folder) is not None:
            _discard(output, folder, "the output holds this conversion already")
        else:
            remove_folder(folder)


def open_work(output: str, key: WorkKey, run_id: str, fresh: bool = False) -> Work:
    """The run's work folder, held by `run_id`: the folder a failed run of this conversion
    left (unless `fresh`), taken over, or a new one. Other conversions' folders are removed,
    with a line saying why."""
    adopted = None
    for name, marker in _our_folders(output).items():
        folder = FileSystems.join(output, name)
        same = name == TEMP_DIR_PREFIX + key.work and marker.get("key") == key.digest
        if same and not fresh:
            adopted = folder
            continue
        reason = "--fresh discards it" if same else why_not(_read_key(folder), key.parts)
        _discard(output, folder, reason)
    if adopted is None:
        folder = start_temp_folder(output, key.work, run_id, key.digest)
        _write_key(folder, key)
        return Work(folder)
    start_temp_folder(output, key.work, run_id, key.digest)  # its old tasks stop
    files = _files(adopted)
    notes = FileSystems.join(adopted, NOTES_DIR) + "/"
    stale = [path for path in files if path.startswith(notes)]  # the old run's progress
    if stale:
        commits.delete_present(stale)
    gone = set(commits.remove_uncommitted(adopted, list(files)))
    kept = {path: size for path, size in files.items() if path not in gone and path not in stale}
    work = Work(adopted, True, sum(kept.values()), _records(kept))
    _log.info(
        "resuming: %s finished by an earlier run (%s in %s) are checked and reused",
        count_of(work.kept_tasks, "task"),
        format_size(work.kept_bytes),
        adopted,
    )
    return work


def kept_counts(work: Work, count: Callable[[], CutCounts | None]) -> CutCounts | None:
    """The counts before each cut: those a failed run of this conversion kept (they depend on
    the inputs and the plan alone; counting a large CSV again took seconds of a rerun), else
    `count()`'s (made by the launcher, kept beside the work; None: a pipeline stage makes and
    keeps them)."""
    if work.adopted:
        kept = commits.kept_value(work.folder, commits.COUNTS_NAME)
        if isinstance(kept, CutCounts):
            return kept
    counts = count()
    if counts is not None:
        commits.keep_value(work.folder, commits.COUNTS_NAME, counts)
    return counts


def _discard(output: str, folder: str, reason: str) -> None:
    """Removes another conversion's work folder, undoing a publishing it left half done."""
    size = sum(_files(folder).values())
    begun = journal.load_journal(folder)
    if begun is not None:
        try:
            current: Manifest | None = load_manifest(output)
        except ManifestError:
            current = None
        journal.roll_back(output, folder, begun, current)
    remove_folder(folder)
    _log.info(
        "starting fresh: the finished work kept in %s (%s) is not this conversion's (%s); removed",
        folder,
        format_size(size),
        reason,
    )


def keep_on_failure(folder: str, planned: int, running: bool = True) -> KeptWork | None:
    """After a run that did not publish: its tasks told to stop, the files of those that
    never finished removed; what is left for a rerun (None: nothing was finished, and the
    folder is removed). `running`: tasks may still be at work (a signal, a stall)."""
    if not mark_stopped(folder):
        return None  # gone: published, or never made
    if running:
        # A task checks the marker before it commits, at most `HELD_SECONDS` old: one that
        # checked just before the stop may still commit. Its record is then counted, not
        # left behind the count (or behind a folder removed as empty).
        time.sleep(HELD_SECONDS + 0.25)
    files = _files(folder)
    gone = set(commits.remove_uncommitted(folder, list(files)))
    kept = {path: size for path, size in files.items() if path not in gone}
    tasks = _records(kept)
    if not tasks and journal.load_journal(folder) is None:
        remove_folder(folder)
        return None
    return KeptWork(folder, sum(kept.values()), tasks, planned)


def kept_as_is(folder: str, planned: int) -> KeptWork | None:
    """What a failed run's folder holds for a rerun, read without changing anything (when
    tidying it failed: a full disk refuses even the marker's rewrite). None: nothing."""
    try:
        files = _files(folder)
    except Exception:  # a store that cannot list now: nothing to say
        return None
    tasks = _records(files)
    return KeptWork(folder, sum(files.values()), tasks, planned) if tasks else None
