"""Publishing as one journalled step: what it will do is written down before it starts, so that
it is either finished or never begun, whatever stops it.

Before publishing moves anything, it writes the companion files and the new manifest into the
work folder (`publish-<name>`), then the journal (`publish.json`): every file to move (shards, dead
letters) to its final name, the companions and the manifest to put in place, and what to remove
after. From there `finish` does it all, in order, the manifest last, and each step can be done
again: a file already moved is checked and passed. A run stopped while it publishes (a signal
lets it finish first: `job.interrupt`) or killed outright leaves the journal, and the next run
of the same conversion finishes it; another conversion `roll_back`s it (the moved files no
manifest lists are removed) before it starts.

The journal is also publishing's claim on the run: the launcher, stopping a run, says so in the
run marker and then looks for the journal; publishing writes the journal and then looks at the
marker (`claim`). Whichever writes first is seen by the other, so a run is either published or
stopped, never both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Sequence

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.bad_rows import DEAD_LETTER_DIR
from beam_jobs.core.errors import DataError
from beam_jobs.core.paths import is_local, is_missing
from beam_jobs.publish.companions import COMPANION_NAMES
from beam_jobs.publish.lease import release
from beam_jobs.publish.output_dir import ours_to_remove
from beam_jobs.sink.commits import file_crc32c
from beam_jobs.sink.run_files import create_run_file, write_at_once
from beam_jobs.sink.temp_folder import RUN_MARKER, remove_folder, stop_if_abandoned
from tfdata_reader.manifest import MANIFEST_NAME, Manifest

__all__ = [
    "JOURNAL_NAME",
    "Journal",
    "claim",
    "damaged",
    "finish",
    "is_begun",
    "load_journal",
    "put_back",
    "roll_back",
    "write",
]

JOURNAL_NAME = "publish.json"
STAGED_PREFIX = "publish-"  # in the work folder: the companions and the manifest, ready to move
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Journal:
    """What publishing does, written down before it does any of it.

    Attributes:
      moves: (work-folder file, name in the output, bytes or -1): shards, then dead letters.
      files: (name in the output, bytes, CRC32C) of the staged companions, then the manifest.
      stale: companion names of an earlier conversion to remove (this one has none of them).
      keep: every file the new manifest lists (shards and dead letters), relative.
      prefixes: shard prefixes whose unlisted files are earlier conversions' (removed after).
      fingerprint: the new dataset's.
    """

    moves: tuple[tuple[str, str, int], ...]
    files: tuple[tuple[str, int, str], ...]
    stale: tuple[str, ...]
    keep: tuple[str, ...]
    prefixes: tuple[str, ...]
    fingerprint: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: bytes | str) -> Journal:
        obj = json.loads(text)
        return cls(
            moves=tuple((str(a), str(b), int(n)) for a, b, n in obj["moves"]),
            files=tuple((str(a), int(n), str(c)) for a, n, c in obj["files"]),
            stale=tuple(obj["stale"]),
            keep=tuple(obj["keep"]),
            prefixes=tuple(obj["prefixes"]),
            fingerprint=str(obj["fingerprint"]),
        )


def _journal_path(work: str) -> str:
    return FileSystems.join(work, JOURNAL_NAME)


def _staged(work: str, name: str) -> str:
    return FileSystems.join(work, STAGED_PREFIX + name)


def write(
    work: str,
    moves: Sequence[tuple[str, str, int]],
    companions: dict[str, bytes],
    manifest: Manifest,
    prefixes: Sequence[str],
) -> Journal:
    """Stages the companion files and the manifest in the work folder, then writes the
    journal (last, at once): from here publishing can be finished by anyone."""
    staged = {**companions, MANIFEST_NAME: manifest.to_json().encode("utf-8")}
    for name, data in staged.items():
        with create_run_file(_staged(work, name)) as f:
            f.write(data)
    journal = Journal(
        moves=tuple(moves),
        files=tuple(
            (name, len(data), f"{google_crc32c.value(data):08x}") for name, data in staged.items()
        ),
        stale=tuple(n for n in COMPANION_NAMES if n not in companions),
        keep=tuple(sorted({s.path for s in manifest.shards} | set(manifest.dead_letter))),
        prefixes=tuple(sorted(prefixes)),
        fingerprint=manifest.fingerprint,
    )
    write_at_once(_journal_path(work), journal.to_json().encode("utf-8"))
    return journal


def claim(work: str, run_id: str) -> None:
    """After `write`: publishing goes on only if the run still holds its folder (the launcher
    did not stop it first); else the journal is withdrawn and `RunAbandoned` raised."""
    if run_id:
        marker = FileSystems.join(work, RUN_MARKER)
        stop_if_abandoned(marker, work, [_journal_path(work)], run_id, max_age=0)


def load_journal(work: str) -> Journal | None:
    """The work folder's journal (None: publishing never began there)."""
    path = _journal_path(work)
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            return Journal.from_json(f.read())
    except (ValueError, KeyError, TypeError):  # cut short: written at once, so never ours
        return None
    except Exception as e:
        if isinstance(e, OSError) or is_missing(e):
            return None
        raise


def is_begun(work: str) -> bool:
    """Whether publishing began in the work folder (its journal is there)."""
    return bool(FileSystems.exists(_journal_path(work)))


def finish(output: str, work: str, journal: Journal, run_id: str = "") -> None:
    """Does what the journal says, each step again if it was done before: the moves, the
    companions, the manifest (last), then removes earlier conversions' files and the work
    folder, and releases `run_id`'s lease.

    Raises:
      DataError: when a file the journal moves is neither where it was nor where it goes.
    """
    present = _files_below(work) | _files_below(output)
    sources, targets = [], []
    for source, name, _ in journal.moves:
        target = FileSystems.join(output, name)
        if source in present:
            sources.append(source)
            targets.append(target)
        elif target not in present:
            raise DataError(
                f"publishing {output} cannot finish: {source} is gone and {target} is not "
                "there; convert again with --fresh"
            )
    if any(n.startswith(DEAD_LETTER_DIR + "/") for _, n, _ in journal.moves):
        folder = FileSystems.join(output, DEAD_LETTER_DIR)
        if is_local(folder) and not os.path.isdir(folder):
            FileSystems.mkdirs(folder)
    if sources:
        FileSystems.rename(sources, targets)
    for name, size, crc in journal.files:  # companions, then the manifest
        _put_in_place(work, output, name, size, crc, present)
    stale = [FileSystems.join(output, n) for n in journal.stale]
    stale = [p for p in stale if p in present]
    removed = ours_to_remove(output, set(journal.keep), set(journal.prefixes))
    if stale or removed:
        FileSystems.delete(stale + removed)
    _remove_if_empty(FileSystems.join(output, DEAD_LETTER_DIR))
    remove_folder(work)
    if run_id:
        release(output, run_id)


def _put_in_place(
    work: str, output: str, name: str, size: int, crc: str, present: set[str]
) -> None:
    """A staged file moved to its name in the output (locally an atomic replace); done before
    when it is no longer staged and the output holds it as recorded."""
    source, target = _staged(work, name), FileSystems.join(output, name)
    if source in present:
        if is_local(target):
            os.replace(source, target)
        else:
            FileSystems.rename([source], [target])  # a copy onto the object, then the delete
        return
    data = b""
    if target in present:
        with FileSystems.open(target, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            data = f.read()
    if target not in present or (len(data), f"{google_crc32c.value(data):08x}") != (size, crc):
        raise DataError(
            f"publishing {output} cannot finish: {source} is gone and {target} is not the "
            "file it staged; convert again with --fresh"
        )


def damaged(output: str, work: str, journal: Journal) -> list[str]:
    """The shards a journal moves that are not as its staged manifest lists them (size and
    CRC32C, wherever each is: still in the work folder or moved), or every one when the staged
    manifest cannot be read. A rerun checks them before it finishes another run's publishing:
    a file may have been damaged while no run held it."""
    try:
        with FileSystems.open(
            _staged(work, MANIFEST_NAME), compression_type=CompressionTypes.UNCOMPRESSED
        ) as f:
            listed = {s.path: (s.bytes, s.crc32c) for s in Manifest.from_json(f.read()).shards}
    except Exception:  # unreadable or gone: nothing can be trusted
        return [name for _, name, _ in journal.moves]
    present = _files_below(work) | _files_below(output)
    found = []
    for source, name, _ in journal.moves:
        if name not in listed:
            continue  # a dead letter: the manifest keeps no CRC32C of it
        path = source if source in present else FileSystems.join(output, name)
        try:
            intact = file_crc32c(path, listed[name][0]) == listed[name]
        except OSError:
            intact = False
        if not intact:
            found.append(name)
    return found


def put_back(output: str, work: str, journal: Journal) -> None:
    """Undoes a journal's moves into the work folder it came from (each file moved back to the
    name its task recorded, so the tasks' records hold again), then withdraws the journal and
    the staged files: the run's work is as a run that stopped before publishing left it."""
    present = _files_below(work) | _files_below(output)
    sources, targets = [], []
    for source, name, _ in journal.moves:
        target = FileSystems.join(output, name)
        if source not in present and target in present:
            sources.append(target)
            targets.append(source)
    if sources:
        FileSystems.rename(sources, targets)
    staged = [_staged(work, name) for name, _, _ in journal.files]
    FileSystems.delete([p for p in staged if p in present] + [_journal_path(work)])
    _remove_if_empty(FileSystems.join(output, DEAD_LETTER_DIR))


def roll_back(output: str, work: str, journal: Journal, current: Manifest | None) -> list[str]:
    """Undoes what a journal's publishing did before it stopped, for another conversion: the
    files it moved into the output that the current manifest does not list are removed (the
    current dataset is whole: the manifest was replaced last, or not at all). Returns them."""
    listed = set()
    if current is not None:
        listed = {s.path for s in current.shards} | set(current.dead_letter)
        if current.fingerprint == journal.fingerprint:
            return []  # it was published: nothing to undo
    present = _files_below(output)
    strays = [
        FileSystems.join(output, name)
        for _, name, _ in journal.moves
        if name not in listed and FileSystems.join(output, name) in present
    ]
    if strays:
        FileSystems.delete(strays)
    return strays


def _files_below(folder: str) -> set[str]:
    """Every file below a folder, as full paths (one recursive listing)."""
    with contextlib.suppress(Exception):
        return {
            m.path for m in FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list
        }
    return set()


def _remove_if_empty(folder: str) -> None:
    """A local folder left empty (dead letters of a failed run, removed); GCS has none."""
    if is_local(folder):
        with contextlib.suppress(OSError):  # missing, or not empty: a user's file is in it
            os.rmdir(folder)
