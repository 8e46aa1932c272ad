"""A Dask scheduler and single-threaded workers as processes on 127.0.0.1, for tests and
benchmarks (what `dask scheduler` and `dask worker` would be on a real cluster)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

from support.gcs import free_port

BIN = pathlib.Path(sys.executable).parent


@contextlib.contextmanager
def dask_cluster(
    folder: pathlib.Path, workers: int = 2, env: dict[str, str] | None = None
) -> Iterator[str]:
    """Yields the scheduler's tcp://127.0.0.1:PORT once `workers` workers have joined; stops
    every process by its PID at the end. `folder` is their current folder and holds the log;
    `env`: the workers' environment (default: this process's)."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = ["--no-dashboard"]
    scheduler = [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), *quiet]
    worker = [BIN / "dask", "worker", address, "--nthreads", "1", "--no-nanny", *quiet]
    processes: list[subprocess.Popen] = []
    with open(folder / "dask-cluster.log", "w") as log:
        try:
            processes.append(_start(scheduler, folder, log))
            for k in range(workers):
                processes.append(_start([*worker, "--name", f"w{k + 1}", "--host", "127.0.0.1"],
                                        folder, log, env))  # fmt: skip
            with Client(address, timeout=60) as client:
                if workers:
                    client.wait_for_workers(workers, timeout=60)
            yield address
        finally:
            for process in reversed(processes):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait()


def _start(argv: list, folder: pathlib.Path, log, env=None) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=env)
