"""One writer per output folder: a lease file created only if it does not exist yet.

A conversion takes `OUT/.tfrecord-etl-lease.json` before it touches the folder, keeps it fresh
while it runs (a heartbeat every 30 s moves its expiry 10 minutes ahead), checks it is still
its own just before publishing, and removes it at the end. A second run into the same folder
finds the lease and stops with `OutputBusy` naming who holds it and since when. A lease is
taken over only when its holder is provably gone: its expiry has passed, or it names this
host and a process id that no longer runs (a killed local run can be rerun at once).

Creation is atomic where the storage allows: `O_CREAT | O_EXCL` on local disk, and on Cloud
Storage an upload with `if_generation_match=0` (a take-over replaces exactly the generation it
read). Other file systems get a best-effort create and read-back. Because some Cloud Storage
emulators ignore preconditions, every run also reads the lease back after taking it and again
before publishing, so two runs never both publish.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import socket
import threading
import time
from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import OutputBusy, UsageError
from beam_jobs.core.paths import is_local

__all__ = [
    "LEASE_NAME",
    "Heartbeat",
    "Lease",
    "acquire",
    "check_holder",
    "read_lease",
    "release",
    "renew",
]

LEASE_NAME = ".tfrecord-etl-lease.json"
HEARTBEAT_SECONDS = 30.0
TTL_SECONDS = 600.0  # a run that stops heartbeating for this long is presumed dead
SUBMITTED_TTL_SECONDS = 12 * 3600.0  # --wait=false: the job itself cannot heartbeat
_SETTLE_SECONDS = 0.5
_log = logging.getLogger(__name__)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _stamp(moment: datetime.datetime) -> str:
    return moment.isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True)
class Lease:
    """Who writes an output folder: a run id, where it runs, and until when it holds it."""

    run_id: str
    host: str
    pid: int
    started: str
    expires: str
    job: str = ""

    def describe(self) -> str:
        job = f", job {self.job}" if self.job else ""
        return f"since {self.started}, pid {self.pid} on {self.host}{job}, expires {self.expires}"

    def is_stale(self) -> bool:
        """Its holder is provably gone: expired, or a dead process on this host."""
        if datetime.datetime.fromisoformat(self.expires) < _now():
            return True
        if self.host == socket.gethostname() and self.pid != os.getpid():
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
        return False

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def _path(output: str) -> str:
    return FileSystems.join(output.rstrip("/"), LEASE_NAME)


def _is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def _gcs_blob(path: str) -> Any:
    from google.cloud import storage  # type: ignore[attr-defined]

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        client = storage.Client.create_anonymous_client()
    else:
        client = storage.Client()
    bucket, _, name = path[len("gs://") :].partition("/")
    return client.bucket(bucket).blob(name)


def read_lease(output: str) -> tuple[Lease | None, Any]:
    """The folder's lease (None when there is none) and a token for replacing exactly it."""
    path = _path(output)
    if _is_gcs(path):
        from google.api_core.exceptions import NotFound

        blob = _gcs_blob(path)
        try:
            text = blob.download_as_bytes()
        except NotFound:
            return None, None
        return _parse(text, path), blob.generation
    if not FileSystems.exists(path):
        return None, None
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            text = f.read()
    except OSError:
        return None, None  # removed between the check and the read
    return _parse(text, path), None


def _parse(text: bytes, path: str) -> Lease:
    try:
        return Lease(**json.loads(text))
    except (ValueError, TypeError) as e:
        # Unreadable: treat it as expired, so a broken file cannot block the folder forever.
        _log.warning("%s is unreadable (%s); taking it as expired", path, e)
        return Lease("?", "?", 0, "?", _stamp(_now() - datetime.timedelta(seconds=1)))


def _create_new(path: str, lease: Lease) -> bool:
    """Writes the lease only if no lease file exists; False when one does."""
    data = lease.to_json().encode("utf-8")
    if _is_gcs(path):
        from google.api_core.exceptions import PreconditionFailed

        blob = _gcs_blob(path)
        # Cloud Storage refuses a second create by its precondition; an emulator that ignores
        # preconditions would let a later run overwrite a live lease after the first run's
        # read-back: looking first leaves only the moment between the look and the write.
        if blob.exists():
            return False
        try:
            blob.upload_from_string(data, if_generation_match=0)
        except PreconditionFailed:
            return False
        return True
    if is_local(path):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return True
    if FileSystems.exists(path):
        return False
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return True


def _replace(path: str, lease: Lease, token: Any) -> bool:
    """Replaces the lease file read with `token` (its generation, on Cloud Storage)."""
    data = lease.to_json().encode("utf-8")
    if _is_gcs(path):
        from google.api_core.exceptions import PreconditionFailed

        try:
            _gcs_blob(path).upload_from_string(data, if_generation_match=token)
        except PreconditionFailed:
            return False
        return True
    if is_local(path):
        temp = f"{path}.{lease.run_id}.tmp"
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, path)  # atomic: readers see the old lease or the new one
        return True
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return True


def _take_over(path: str, lease: Lease, token: Any) -> bool:
    """Replaces a stale lease; of several runs trying at once, one wins."""
    if is_local(path):
        # Renaming the stale file away succeeds for exactly one run; then create it anew.
        try:
            os.rename(path, f"{path}.{lease.run_id}.stale")
        except FileNotFoundError:
            return False
        os.remove(f"{path}.{lease.run_id}.stale")
        return _create_new(path, lease)
    return _replace(path, lease, token)


def _new_lease(run_id: str, ttl: float, job: str = "") -> Lease:
    now = _now()
    return Lease(
        run_id=run_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        started=_stamp(now),
        expires=_stamp(now + datetime.timedelta(seconds=ttl)),
        job=job,
    )


def acquire(output: str, run_id: str, ttl: float = TTL_SECONDS, job: str = "") -> Lease:
    """Takes the output folder's lease for `run_id`.

    Raises:
      OutputBusy: naming the holder, when another live run holds it.
    """
    path = _path(output)
    if is_local(path):
        if os.path.isfile(output):
            raise UsageError(f"--output {output} is a file; give a directory")
        os.makedirs(output, exist_ok=True)
    lease = _new_lease(run_id, ttl, job)
    for _ in range(3):
        if _create_new(path, lease):
            break
        held, token = read_lease(output)
        if held is None:
            continue  # released in between: try again
        if not held.is_stale():
            raise OutputBusy(
                f"another conversion is writing {output} ({held.describe()}); wait for it to "
                f"finish, or, if it is dead, remove {path}"
            )
        _log.warning("taking over the lease of a run that is gone (%s)", held.describe())
        if _take_over(path, lease, token):
            break
    if not is_local(path):
        # Some stores (Cloud Storage emulators among them) ignore preconditions: let a write
        # that raced ours land, so that the read-back sees the one that won.
        time.sleep(_SETTLE_SECONDS)
    check_holder(output, run_id)
    return lease


def check_holder(output: str, run_id: str) -> None:
    """Raises `OutputBusy` unless `run_id` holds the output's lease. A run without an id
    (`WriteShards`, which takes no lease) is stopped only by a live foreign lease.

    A run with an id whose lease is gone must not publish either: its launcher released it
    when the run was interrupted, and tasks a cluster keeps running (Dask does not stop a task
    that has started) would otherwise publish the abandoned run, over a newer one."""
    held, _ = read_lease(output)
    if held is None and run_id:
        raise OutputBusy(
            f"the lease of run {run_id} on {output} is gone (its launcher was interrupted or "
            "ended); this run published nothing"
        )
    if held is None or held.run_id == run_id:
        return
    if run_id or not held.is_stale():
        raise OutputBusy(
            f"another conversion holds {output} ({held.describe()}); this run published nothing"
        )


def renew(
    output: str, lease: Lease, ttl: float = TTL_SECONDS, job: str | None = None
) -> Lease | None:
    """Moves the expiry ahead (and records `job`, when given) while the lease is still ours;
    None once it is not."""
    held, token = read_lease(output)
    if held is None or held.run_id != lease.run_id:
        return None
    renewed = dataclasses.replace(
        lease,
        expires=_stamp(_now() + datetime.timedelta(seconds=ttl)),
        job=lease.job if job is None else job,
    )
    return renewed if _replace(_path(output), renewed, token) else None


def release(output: str, run_id: str) -> None:
    """Removes the lease if `run_id` holds it (a no-op otherwise)."""
    held, token = read_lease(output)
    if held is None or held.run_id != run_id:
        return
    path = _path(output)
    if _is_gcs(path):
        from google.api_core.exceptions import NotFound, PreconditionFailed

        with contextlib.suppress(NotFound, PreconditionFailed):
            _gcs_blob(path).delete(if_generation_match=token)
    else:
        with contextlib.suppress(OSError):
            FileSystems.delete([path])


class Heartbeat:
    """Renews a lease every `interval` seconds from a daemon thread until `stop()`."""

    def __init__(self, output: str, lease: Lease, interval: float = HEARTBEAT_SECONDS) -> None:
        self._output, self._lease, self._interval = output, lease, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                renewed = renew(self._output, self._lease)
            except Exception as e:  # a storage hiccup: the next beat tries again
                _log.warning("could not renew the lease on %s: %s", self._output, e)
                continue
            if renewed is None:
                _log.warning("the lease on %s is no longer this run's", self._output)
                return
            self._lease = renewed
