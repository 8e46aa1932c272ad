"""Which runner runs a conversion, and the argv fix-ups that come before Beam parses it.

No `--runner`: Beam's local FnApiRunner with one worker per core, which never reaches for the
network. `--runner DirectRunner`: the same, because Beam 2.77's DirectRunner first tries to
download the Prism runner binary. Any other runner is used as given (`--runner DaskRunner`:
beam_jobs.on_dask).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from beam_jobs import local_runner_fix, local_workers, on_dask

__all__ = ["choose_runner", "normalize_argv"]

LOCAL_RUNNER = "FnApiRunner"
LOCAL_THREADS_MAX_BYTES = 1 << 30


def check_flags(argv: Sequence[str]) -> None:
    """Raises UsageError for a flag that is neither ours nor any Beam pipeline option's.

    Beam only logs "Discarding unparseable args" and goes on, so `--compresion gzip` would
    convert without compression and exit 0. The flags are parsed as Beam parses them (every
    registered options class, no abbreviations); a close match is suggested.
    """
    import difflib

    from apache_beam.options.pipeline_options import _BeamArgumentParser
    from apache_beam.runners.dask import dask_runner  # noqa: F401  (registers --dask_* flags)

    from beam_jobs.errors import UsageError
    from beam_jobs.options import ConvertOptions  # noqa: F401  (registers our flags)

    parser = _BeamArgumentParser(allow_abbrev=False)
    classes: dict[str, type[PipelineOptions]] = {}
    for cls in PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(list(argv))
    flags = [arg.split("=", 1)[0] for arg in unknown if arg.startswith("-")]
    if not flags:
        stray = [arg for arg in unknown if not arg.startswith("-")]
        if stray:
            # Most often a glob the shell expanded: `--input dir/*.csv` gives the first file to
            # --input and the others as loose words, which Beam would ignore.
            raise UsageError(
                f"unexpected argument{'s' if len(stray) > 1 else ''} {', '.join(stray[:3])}"
                f"{', ...' if len(stray) > 3 else ''}: every value belongs to a flag; quote a "
                "pattern so the shell leaves it to us (--input 'dir/*.csv'), or repeat --input for "
                "each file"
            )
        return
    known = [s for s in parser._option_string_actions if s.startswith("--")]
    problems = []
    for flag in flags:
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        problems.append(f"{flag} (did you mean {close[0]}?)" if close else flag)
    raise UsageError(
        f"unknown flag{'s' if len(flags) > 1 else ''}: {', '.join(problems)}; "
        "`tfrecord-etl convert --help` lists convert's flags, and any Beam pipeline option is "
        "accepted too"
    )


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Lets `--dry_run` stand alone (Beam's own --dry_run flag expects a value), and reads
    `--labels FILE` as `--image_labels FILE` and `--label COLUMN` as `--label_column COLUMN`:
    Beam's Dataflow options own `--label(s) key=value` (job labels), so only a value without
    '=' is ours."""
    argv = ["--dry_run=true" if arg == "--dry_run" else arg for arg in argv]
    normalized: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        for beams, ours in _SHARED_FLAGS:
            if arg == beams and i + 1 < len(argv) and _not_a_job_label(argv[i + 1]):
                arg = f"{ours}={argv[i + 1]}"
                i += 1
            elif arg.startswith(beams + "=") and _not_a_job_label(arg.split("=", 1)[1]):
                arg = ours + "=" + arg.split("=", 1)[1]
        normalized.append(arg)
        i += 1
    return normalized


def _not_a_job_label(value: str) -> bool:
    """A file or column name, not one of Beam's Dataflow job labels (`key=value`, or JSON)."""
    return "=" not in value and not value.lstrip().startswith("{")


# Beam's Dataflow flags whose value tells when they are ours: (Beam's flag, ours).
_SHARED_FLAGS = (("--labels", "--image_labels"), ("--label", "--label_column"))


def choose_runner(
    options: PipelineOptions, argv: Sequence[str], input_bytes: int | None = None
) -> str:
    """Chooses the runner; returns a note for the user when it changed what they asked for.

    No `--runner`: Beam's FnApiRunner with one worker per core, as threads of this process for
    inputs up to `LOCAL_THREADS_MAX_BYTES` (starting worker processes costs seconds, and the
    hot path is C++ that releases the GIL: 2M rows convert 10-25% faster here), as processes
    for larger inputs, where they scale past the GIL. Threads only with `local_runner_fix`
    applied (Beam 2.77's in-process workers otherwise drop data); else processes.
    `--runner DirectRunner`: the same, because Beam 2.77's DirectRunner first tries to download
    the Prism runner binary, which an offline machine cannot; pass `--prism_location` to a local
    Prism binary to keep DirectRunner. Any other runner is used as given.
    """
    standard = options.view_as(StandardOptions)
    direct = options.view_as(DirectOptions)
    note = ""
    runner = standard.runner
    wants_direct = runner in ("DirectRunner", "direct", "directrunner")
    has_prism = any(a.startswith("--prism_location") for a in argv)
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
        if not any(a.startswith("--direct_running_mode") for a in argv):
            small = input_bytes is not None and input_bytes <= LOCAL_THREADS_MAX_BYTES
            threads = small and fixed
            direct.direct_running_mode = "multi_threading" if threads else "multi_processing"
        elif direct.direct_running_mode == "multi_threading" and not fixed:
            note = (
                "--direct_running_mode=multi_threading on this Beam version may drop elements "
                "silently (see docs/beam-local-runner-data-loss.md); every run's counts are "
                "checked, but multi_processing is safe"
            )
        if not any(a.startswith("--direct_num_workers") for a in argv):
            direct.direct_num_workers = os.cpu_count() or 1
        logging.getLogger(__name__).info(
            "local runner: %s with %d worker %s",
            LOCAL_RUNNER,
            direct.direct_num_workers,
            {"multi_threading": "threads", "multi_processing": "processes"}.get(
                direct.direct_running_mode, f"({direct.direct_running_mode})"
            ),
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

    from beam_jobs.errors import UsageError

    try:
        create_runner(name)
    except (ValueError, ImportError, AttributeError) as e:
        raise UsageError(f"--runner {name}: {e}") from None
