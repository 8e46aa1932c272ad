"""Which runner runs a conversion.

No `--runner`: Beam's local FnApiRunner with one worker per core, which never reaches for the
network. `--runner DirectRunner`: the same, because Beam 2.77's DirectRunner first tries to
download the Prism runner binary. Any other runner is used as given (`--runner DaskRunner`:
beam_jobs.job.on_dask).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from beam_jobs.job import local_workers, on_dask
from beam_jobs.transforms import local_runner_fix

__all__ = ["LOCAL_RUNNER", "choose_runner"]

LOCAL_RUNNER = "FnApiRunner"
LOCAL_THREADS_MAX_BYTES = 1 << 30
PROCESSES_PAY_BYTES = 128 << 20


def choose_runner(
    options: PipelineOptions,
    given: Iterable[str],
    input_bytes: int | None = None,
    per_column_bound: bool = False,
) -> str:
    """Chooses the runner; returns a note for the user when it changed what they asked for.

    No `--runner`: Beam's FnApiRunner with one worker per core, as threads of this process for
    inputs up to `LOCAL_THREADS_MAX_BYTES` (starting worker processes costs seconds, and the
    hot path is C++ that releases the GIL: 2M rows convert 10-25% faster here), as processes
    for larger inputs, where they scale past the GIL. Rows of more columns than a batch
    holds rows (`per_column_bound`: per-column Python work, where two threads are slower than
    one) run in one thread up to PROCESSES_PAY_BYTES, in processes above (296 MB of 5,000
    columns: 21.0 s in two threads, 15.4 s in processes).
    Threads only with `local_runner_fix` applied (Beam 2.77's in-process workers otherwise
    drop data); else processes.
    `--runner DirectRunner`: the same, because Beam 2.77's DirectRunner first tries to download
    the Prism runner binary, which an offline machine cannot; pass `--prism_location` to a local
    Prism binary to keep DirectRunner. Any other runner is used as given. `given`: the Beam
    options the user gave (command-line args or option names): those are never changed.
    """
    named = {g.split("=", 1)[0].removeprefix("--") for g in given}
    standard = options.view_as(StandardOptions)
    direct = options.view_as(DirectOptions)
    note = ""
    runner = standard.runner
    wants_direct = runner in ("DirectRunner", "direct", "directrunner")
    has_prism = "prism_location" in named
    if runner is None or (wants_direct and not has_prism):
        if wants_direct:
            note = (
                f"running on Beam's local {LOCAL_RUNNER} instead of DirectRunner, which would "
                "first "
                "try to download the Prism runner (pass --prism_location=BINARY to use Prism)"
            )
        standard.runner = LOCAL_RUNNER
        fixed = local_runner_fix.apply()  # threads drop data on Beam 2.77 without it
        local_workers.apply()  # Ctrl-C reaches the launcher only, not each worker process
        # Per-column work: threads wait for each other's interpreter lock, so one thread, or
        # worker processes past PROCESSES_PAY_BYTES, below which they cost more to start than
        # they gain (74 MB of 5,000 columns: one thread 6.2 s, two 6.8 s, processes 6.9 s).
        one_thread = per_column_bound and (input_bytes or 0) <= PROCESSES_PAY_BYTES
        if "direct_running_mode" not in named:
            small = input_bytes is not None and input_bytes <= LOCAL_THREADS_MAX_BYTES
            threads = small and fixed and (one_thread or not per_column_bound)
            direct.direct_running_mode = "multi_threading" if threads else "multi_processing"
        elif direct.direct_running_mode == "multi_threading" and not fixed:
            note = (
                "--direct_running_mode=multi_threading on this Beam version may drop elements "
                "silently (see docs/beam-local-runner-data-loss.md); every run's counts are "
                "checked, but multi_processing is safe"
            )
        if "direct_num_workers" not in named:
            threads = direct.direct_running_mode == "multi_threading"
            direct.direct_num_workers = 1 if one_thread and threads else os.cpu_count() or 1
        workers = direct.direct_num_workers
        kinds = {"multi_threading": ("thread", "threads"),
                 "multi_processing": ("process", "processes")}  # fmt: skip
        other = f"({direct.direct_running_mode})"
        one, many = kinds.get(direct.direct_running_mode, (other, other))
        noun = one if workers == 1 else many
        logging.getLogger(__name__).info(
            "local runner: %s with %d worker %s", LOCAL_RUNNER, workers, noun
        )
    elif not on_dask.is_dask(options):
        _check_runner(runner)
    if note:
        logging.getLogger(__name__).warning(note)
    return note


def _check_runner(name: str) -> None:
    """A usage error, before anything is planned or written, for a runner Beam does not know
    (Beam itself says so only when the pipeline starts: exit 3, with the lease taken)."""
    from apache_beam.runners.runner import create_runner

    from beam_jobs.core.errors import UsageError

    try:
        create_runner(name)
    except (ValueError, ImportError, AttributeError) as e:
        raise UsageError(f"--runner {name}: {e}") from None
