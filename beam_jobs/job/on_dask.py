"""Running a conversion on a Dask cluster through Beam's DaskRunner.

Beam's DaskRunner translates the pipeline into a `dask.bag` graph. Four of its ways shape how
we use it (Beam 2.77, dask/distributed 2026.8):
- `Create` puts up to 128 elements in one partition, so without `--dask_npartitions` one task
  would write every shard: the partitions default to the planned write tasks (a partition a
  task), up to MAX_PARTITIONS. The graph the launcher builds holds about a thousand Dask
  objects a partition (230 KB: 1,000 partitions took 230 MB of the launcher's memory, and
  each partition 45 ms of scheduling), so more write tasks share the partitions, in order.
- `Reshuffle` is a no-op, so nothing after `Create` spreads elements out: the partitions above
  are the only parallelism there is.
- A side input is computed inside every task that reads it: the counts before each cut, which
  CSV and line-based writers read as a side input elsewhere, are computed here once, one Dask
  task per segment, before the pipeline starts (`count_cuts`).
- The graph is not promised to outlive its client, so `--wait=false` is refused, and Beam
  metrics are not implemented (progress and the summary never depend on them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator, Sequence
from urllib.parse import urlparse

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_jobs.core.errors import UsageError
from beam_jobs.core.paths import is_local
from beam_jobs.formats.lines.cut_counts import CutCounts, Segment, count_segment

__all__ = ["DASK_RUNNER", "cluster", "count_cuts", "is_dask", "prepare"]

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
_NAMES = {"dask", "daskrunner", DASK_RUNNER.lower()}
WAIT_FOR_WORKERS_SECONDS = 30  # for a scheduler that has none yet (they may be starting)
MAX_PARTITIONS = 512  # 4 a thread for 128 four-thread workers; more: --dask_npartitions
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
_log = logging.getLogger(__name__)


def is_dask(options: PipelineOptions) -> bool:
    """Whether `--runner` names Beam's DaskRunner (`DaskRunner`, `dask`, or its class path)."""
    runner = options.view_as(StandardOptions).runner
    return runner is not None and runner.lower() in _NAMES


def prepare(options: PipelineOptions, num_tasks: int, wait: bool) -> None:
    """Sets the runner's class path (Beam takes no short name for it) and, unless the user set
    `--dask_npartitions` or `--dask_partition_size`, one partition per write task, at most
    MAX_PARTITIONS.

    Raises:
      UsageError: for `--wait=false`, a partition flag below 1, or when the dask packages are
        missing.
    """
    from apache_beam.runners.dask.dask_runner import DaskOptions

    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(
            "--runner DaskRunner needs the dask and distributed packages: "
            "pip install 'tfrecord-etl[dask]'"
        ) from None
    if not wait:
        raise UsageError(
            "--wait=false is not supported with --runner DaskRunner: Dask does not keep a "
            "graph running once its client leaves, so the conversion would stop half done"
        )
    options.view_as(StandardOptions).runner = DASK_RUNNER
    dask = options.view_as(DaskOptions)
    for flag, value in (
        ("--dask_npartitions", dask.npartitions),
        ("--dask_partition_size", dask.partition_size),
    ):
        # Dask makes an empty bag of a negative count (nothing written) and Beam reads 0 as
        # "not set" (128 shards to a partition).
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    if dask.npartitions is None and dask.partition_size is None:
        dask.npartitions = min(max(num_tasks, 1), MAX_PARTITIONS)


@contextlib.contextmanager
def cluster(options: PipelineOptions, paths: Sequence[str]) -> Iterator[str]:
    """The Dask scheduler's address for the run, while the block runs.

    With `--dask_client_address` (or `--dask_scheduler_file`): that cluster, after checking
    that local `paths` (inputs and output) are not given to workers on other hosts, which
    could not see them. Without either: a local cluster with one single-threaded worker
    process per core on 127.0.0.1, stopped when the block ends.

    Raises:
      UsageError: a local path for workers on other hosts.
    """
    from apache_beam.runners.dask.dask_runner import DaskOptions
    from distributed import Client, LocalCluster

    dask = options.view_as(DaskOptions)
    if dask.address or dask.scheduler_file:
        connect = {"address": dask.address, "scheduler_file": dask.scheduler_file}
        if isinstance(dask.timeout, int):  # else dask's default
            connect["timeout"] = dask.timeout
        where = dask.address or f"the scheduler in {dask.scheduler_file}"
        try:
            client = Client(**connect)
        except (ValueError, TypeError) as e:  # not an address at all
            raise UsageError(f"--dask_client_address {where}: {e}") from None
        with client:
            try:
                client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_SECONDS)
            except (TimeoutError, OSError):
                raise UsageError(
                    f"the Dask scheduler at {where} has no workers (waited "
                    f"{WAIT_FOR_WORKERS_SECONDS} s): start some (`dask worker {where}`)"
                ) from None
            _check_hosts(client, paths)
            address = str(client.scheduler_info()["address"])
        yield address
        return
    workers = os.cpu_count() or 1
    with LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as local:
        _log.info(
            "no --dask_client_address: started a local Dask cluster of %d worker processes at %s",
            workers,
            local.scheduler_address,
        )
        dask.address = local.scheduler_address
        try:
            yield local.scheduler_address
        finally:
            dask.address = None


def count_cuts(address: str, segments: Sequence[Segment]) -> CutCounts:
    """Counts quotes and newlines before each cut once, a Dask task per segment."""
    from distributed import Client

    if not segments:
        return CutCounts.from_counted([])
    with Client(address) as client:
        futures = client.map(count_segment, list(segments), pure=False)
        return CutCounts.from_counted(client.gather(futures))


def _check_hosts(client, paths: Sequence[str]) -> None:
    """Refuses local paths when some workers run on another host."""
    local = [p for p in paths if is_local(p)]
    if not local:
        return
    hosts = {urlparse(w).hostname for w in client.scheduler_info()["workers"]}
    elsewhere = sorted(h for h in hosts if h and not _is_this_host(h))
    if elsewhere:
        raise UsageError(
            f"{local[0]} is a local path, but Dask workers run on other hosts "
            f"({', '.join(elsewhere)}), which cannot see it: put inputs and --output on "
            "storage every worker reads, such as gs:// (deploy/dask/README.md)"
        )


def _is_this_host(host: str) -> bool:
    if host in _LOCAL_HOSTS or host.startswith("127."):
        return True
    names = {socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):  # a host without a resolvable name
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    return host in names
