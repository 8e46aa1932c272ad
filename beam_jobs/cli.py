"""Command-line interface: `tfrecord-etl convert | inspect | verify | diff | report` (also
`python -m beam_jobs`).

Exit codes: 0 success; 1 a data problem (more bad rows than --max_bad_fraction, input that is
not of its format, a shard that fails `verify`, a missing or malformed manifest); 2 a usage error
(bad flag value, an input pattern that matches nothing, an output that is a file or holds
foreign files); 3 any other failure (a runner or storage error); 4 another conversion is writing
the output folder (try again later); 130 and 143 interrupted by SIGINT (Ctrl-C) or SIGTERM, with
nothing published. `convert` ends with one JSON line on stdout: {"status": "ok" |
"already_converted" | "dry_run" | "submitted" | "error" | "interrupted", "exit_code": N, ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from beam_jobs.core.units import count_of
from beam_jobs.core.version import __version__
from beam_jobs.job.interrupt import Interrupted, deferred_while, interruptible, raised
from beam_jobs.job.quiet import beam_errors_quiet

if TYPE_CHECKING:
    from beam_jobs.job.launcher import ConvertResult

__all__ = ["main"]

EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_OTHER, EXIT_BUSY = 0, 1, 2, 3, 4

_USAGE = """\
usage: tfrecord-etl {convert,inspect,verify,diff,report} ...

  convert --input PATTERN --output DIR [--format csv|jsonl|parquet|text|images|tfrecord]
          [--schema FILE] [--labels labels.csv] [--splits train=80,eval=20 [--split_key COL]]
          [--target_shard_bytes 256MiB | --num_shards N] [--compression none|gzip]
          [--shard_prefix data] [any Beam pipeline flag, e.g. --runner DataflowRunner]
  inspect DIR [--schema | --stats]  summary of a converted dataset (its schema as JSON, or
                             each feature's statistics)
  inspect --input PATTERN [--format F] [--schema] [--delimiter, --encoding, ... as convert]
                             the feature spec convert infers from raw inputs
  verify DIR                 re-read every shard and check it against the manifest
  diff A B                   whether two datasets hold the same records (exit 0) or not (1)
  report DIR [-o report.html]  one self-contained HTML page about a converted dataset

Any command takes --verbose: tracebacks and Beam's worker logs for failures.

`tfrecord-etl convert --help` lists convert's flags.
"""


def _convert(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        from beam_jobs.job.argv import parser

        parser(
            description="Convert raw files into size-targeted TFRecord shards and a manifest. "
            "Any Beam pipeline flag is accepted too; without --runner the job runs on the local "
            "FnApiRunner with one worker per core (threads up to 1 GiB of input, processes "
            "above)."
        ).print_help()
        return EXIT_OK
    started = time.monotonic()
    try:
        with interruptible():
            # Imported here: Beam and TensorFlow take seconds to import, and a Ctrl-C or
            # SIGTERM meanwhile must end the run as cleanly as one later on.
            from beam_jobs.job.collector import long_lived_imports

            with long_lived_imports():
                from beam_jobs.job.launcher import run
            if raised() is not None:  # raised where Python only prints it (an import's lock)
                raise Interrupted(raised() or 0)

            result = run(argv)
            # The run is over (published, or nothing to do): a signal now changes nothing,
            # and the summary is still printed.
            with deferred_while(lambda: True):
                return _converted(result, time.monotonic() - started)
    except Interrupted as e:
        _interrupted(e, e)
    except Exception as e:
        signum = raised()
        if signum is None:
            raise
        _interrupted(Interrupted(signum), e)  # the signal's, wrapped by code it went through
    return EXIT_OTHER  # not reached: `_interrupted` ends the process


def _interrupted(e: Interrupted, carrier: BaseException) -> None:
    """Says that a signal ended the run (`carrier`: what reached here, with the kept work)."""
    kept = getattr(carrier, "kept_work", None)
    again = kept.describe() if kept else "run the same command again to convert"
    print(f"error: interrupted by {e.name}: nothing was published; {again}", file=sys.stderr)
    _summary_line("interrupted", e.exit_code, signal=e.name, **_kept_fields(carrier))
    sys.stderr.flush()
    os._exit(e.exit_code)  # beam_jobs.job.interrupt: no shutdown around the runner's threads


def _converted(result: ConvertResult, elapsed: float) -> int:
    """Prints what a conversion that ended well did: its summary and notes, or its plan."""
    from beam_jobs.inspection.report import (
        bad_rows_note,
        float32_changes_note,
        ignored_fields_note,
        missing_label_note,
        notes_lines_note,
        null_markers_note,
        resumed_note,
        short_rows_note,
        summarize_run,
        units_note,
    )

    status = result.status
    if result.plan is not None:
        from beam_jobs.inspection.report import describe_plan

        config = result.config
        print(describe_plan(result.plan, config.output))
        _summary_line(status.value, EXIT_OK, planned_shards=len(result.plan.shards))
        return EXIT_OK
    if result.submitted_job is not None:
        print(
            f"submitted job {result.submitted_job}; it publishes "
            f"{result.config.output}/manifest.json when it finishes"
        )
        _summary_line(status.value, EXIT_OK, job_id=result.submitted_job)
        return EXIT_OK
    manifest = result.manifest
    assert manifest is not None  # converted, or found already converted
    if result.converted:
        notes = [
            *resumed_note(manifest),
            *_deferred_note(),
            *ignored_fields_note(manifest),
            *missing_label_note(manifest),
            *float32_changes_note(manifest),
            *null_markers_note(manifest),
            *short_rows_note(manifest),
            *notes_lines_note(manifest),
            *units_note(manifest),
        ]
        print("\n".join([summarize_run(manifest, elapsed), *notes]))
        if manifest.counts.bad_records:
            print("\n".join(bad_rows_note(result.config.output, manifest.dead_letter)))
    else:
        print(
            f"already converted: the output holds a complete manifest of these inputs and options "
            f"({manifest.total_records:,} records in {count_of(len(manifest.shards), 'shard')}); "
            "pass --overwrite to convert again"
        )
    _summary_line(
        status.value,
        EXIT_OK,
        records_read=manifest.counts.records_read or manifest.total_records,
        records_written=manifest.total_records,
        bad_records=manifest.counts.bad_records,
        shards=len(manifest.shards),
        bytes=manifest.total_bytes,
        fingerprint=manifest.fingerprint,
        elapsed_seconds=round(elapsed, 3),
        **({"tasks_reused": manifest.counts.tasks_reused} if result.converted else {}),
    )
    return EXIT_OK


def _deferred_note() -> list[str]:
    """A signal put off while publishing: said, since the run ended well despite it."""
    from beam_jobs.job.interrupt import deferred

    signum = deferred()
    if signum is None:
        return []
    import signal

    return [f"{signal.Signals(signum).name} came while publishing: publishing finished first"]


def _kept_fields(error: BaseException) -> dict[str, object]:
    """The JSON status line's account of a failed run's kept work."""
    kept = getattr(error, "kept_work", None)
    if kept is None:
        return {}
    return {"kept_work": kept.folder, "kept_bytes": kept.bytes, "kept_tasks": kept.tasks}


def _summary_line(status: str, exit_code: int, **fields: object) -> None:
    """The last line `convert` prints: one JSON object for schedulers."""
    print(json.dumps({"status": status, "exit_code": exit_code, **fields}), flush=True)


def _inspect(argv: list[str]) -> int:
    from beam_jobs.config.convert import ConvertConfig
    from beam_jobs.core import flags
    from beam_jobs.inspection.report import describe
    from beam_jobs.publish.output_dir import load_manifest
    from tfdata_reader.manifest import schema_to_json

    parser = argparse.ArgumentParser(
        allow_abbrev=False,  # --label is not --labels
        prog="tfrecord-etl inspect",
        description="Summarize a converted dataset, or (with --input) infer the feature spec of "
        "raw inputs; --schema prints the spec as JSON for convert --schema.",
    )
    parser.add_argument("output", nargs="?", help="a conversion's output directory")
    parser.add_argument("--input", action="append", help="raw input files or patterns instead")
    parser.add_argument(
        "--schema", action="store_true", help="print only the feature spec, as --schema JSON"
    )
    parser.add_argument(
        "--stats", action="store_true", help="print each feature's statistics (statistics.pb)"
    )
    reading = parser.add_argument_group("how --input is read (as for convert)")
    flags.add_arguments(reading, ConvertConfig, only=lambda flag: flag.reading)
    args = parser.parse_args(argv)
    if args.input:
        return _inspect_inputs(args)
    if not args.output:
        parser.error("give a dataset directory, or --input PATTERN to infer a raw input's spec")
    if args.stats:
        from beam_jobs.inspection.stats_table import load_statistics, statistics_table

        print(statistics_table(load_statistics(args.output)))
        return EXIT_OK
    manifest = load_manifest(args.output)
    print(schema_to_json(manifest.features) if args.schema else describe(manifest, args.output))
    return EXIT_OK


def _inspect_inputs(args: argparse.Namespace) -> int:
    """The spec `convert` would infer for raw inputs (and its plan, without --schema)."""
    from beam_jobs.config.convert import ConvertConfig
    from beam_jobs.core import flags
    from beam_jobs.inspection.report import describe_plan
    from beam_jobs.plan.conversion import make_plan
    from tfdata_reader.manifest import schema_to_json

    reading = {f.name: getattr(args, f.name) for f in flags.flags(ConvertConfig) if f.reading}
    config = ConvertConfig.from_flags({"input": args.input, **reading}, plan_only=True)
    plan = make_plan(config)
    if args.schema:
        print(schema_to_json(list(plan.features)), end="")
    else:
        print(describe_plan(plan, None))
    return EXIT_OK


def _verify(argv: list[str]) -> int:
    from beam_jobs.inspection.verify import verify

    parser = argparse.ArgumentParser(prog="tfrecord-etl verify")
    parser.add_argument("output", help="a conversion's output directory")
    args = parser.parse_args(argv)
    manifest, problems = verify(args.output)
    for problem in problems:
        print(f"BAD {problem.path}: {problem.problem}")
    if problems:
        bad = len({p.path for p in problems})
        print(f"verify failed: {bad} bad file(s) in {args.output}")
        return EXIT_DATA
    print(
        f"verify ok: {count_of(len(manifest.shards), 'shard')}, {manifest.total_records:,} records "
        f"match {args.output}/manifest.json"
    )
    return EXIT_OK


def _diff(argv: list[str]) -> int:
    from beam_jobs.inspection.diff import compare

    parser = argparse.ArgumentParser(
        prog="tfrecord-etl diff",
        description="Whether two converted datasets hold the same records (exit 0) or not "
        "(exit 1, with the first difference); exit 2 when one cannot be read.",
    )
    parser.add_argument("a", help="a conversion's output directory")
    parser.add_argument("b", help="another one")
    args = parser.parse_args(argv)
    if not _VERBOSE:
        from tfdata_reader.quiet import import_tensorflow_quietly

        import_tensorflow_quietly()
    import tensorflow as tf

    from beam_jobs.core.errors import ManifestError

    try:
        result = compare(args.a, args.b)
    except (ManifestError, OSError, tf.errors.OpError) as e:
        # Not "they differ" (1): a script running `diff A B || reconvert` must tell them apart.
        print(f"error: cannot compare {args.a} and {args.b}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(result.lines))
    return EXIT_OK if result.same else EXIT_DATA


def _report(argv: list[str]) -> int:
    from beam_jobs.inspection.html_report import write_report

    parser = argparse.ArgumentParser(
        prog="tfrecord-etl report",
        description="Write one self-contained HTML page about a converted dataset: summary, "
        "shard sizes against the target, each feature's histogram or top values, the splits "
        "and the dead-letter reasons.",
    )
    parser.add_argument("output", help="a conversion's output directory (local or gs://)")
    parser.add_argument(
        "-o", "--out", default="report.html", help="the page to write (default: report.html)"
    )
    args = parser.parse_args(argv)
    data = write_report(args.output, args.out)
    print(
        f"report written to {args.out}: {data.manifest.total_records:,} records, "
        f"{count_of(len(data.manifest.shards), 'shard')}, {len(data.manifest.features)} features"
    )
    return EXIT_OK


_VERBOSE = False  # --verbose: Beam's and TensorFlow's own output too

_COMMANDS = {
    "convert": _convert,
    "inspect": _inspect,
    "verify": _verify,
    "diff": _diff,
    "report": _report,
}


def _configure_logging(verbose: bool) -> None:
    """Our progress and summary at INFO; without --verbose, none of the tracebacks Beam's
    workers log for a failing step (the error itself is printed once, by `_fail`) and none of
    TensorFlow's start-up notices."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("beam_jobs").setLevel(logging.INFO)
    # Local worker processes relay every startup notice as a warning; errors still show.
    logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, end="")
        return EXIT_OK if argv else EXIT_USAGE
    if argv[0] == "--version":
        print(f"tfrecord-etl {__version__}")
        return EXIT_OK
    command = _COMMANDS.get(argv[0])
    if command is None:
        print(f"unknown command {argv[0]!r}\n\n{_USAGE}", file=sys.stderr, end="")
        return EXIT_USAGE
    verbose = "--verbose" in argv
    argv = [a for a in argv if a != "--verbose"]
    global _VERBOSE
    _VERBOSE = verbose
    _configure_logging(verbose)

    from beam_jobs.core.errors import (
        DataError,
        ManifestError,
        OutputBusy,
        Stalled,
        TooManyBadRecords,
        UsageError,
    )

    try:
        with contextlib.nullcontext() if verbose else beam_errors_quiet():
            return command(argv[1:])
    except UsageError as e:
        return _fail(argv[0], EXIT_USAGE, e)
    except OutputBusy as e:
        return _fail(argv[0], EXIT_BUSY, e, status="busy")
    except TooManyBadRecords as e:
        from beam_jobs.inspection.report import bad_rows_note

        return _fail(argv[0], EXIT_DATA, e, bad_rows_note(e.output, e.dead_letters))
    except (DataError, ManifestError) as e:
        return _fail(argv[0], EXIT_DATA, e)
    except Stalled as e:
        return _fail(argv[0], EXIT_OTHER, e)
    except Exception as e:
        full = _full_disk(e)
        if full is not None:
            return _fail(argv[0], EXIT_OTHER, full, status="error")
        if verbose:
            logging.getLogger("beam_jobs.cli").exception("%s failed", argv[0])
            return _fail(argv[0], EXIT_OTHER, e)
        # A runner hands a worker's error over as its whole traceback: its last line says it.
        return _fail(
            argv[0], EXIT_OTHER, e, ["(run again with --verbose for the traceback)"], short=True
        )


def _full_disk(error: BaseException) -> BaseException | None:
    """A full disk (ENOSPC, here or in what caused it) as an error that says what to do,
    carrying what the run kept; None for any other error."""
    cause: BaseException | None = error
    while cause is not None and not (isinstance(cause, OSError) and cause.errno == errno.ENOSPC):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    where = f" writing {cause.filename}" if getattr(cause, "filename", None) else ""
    said = RuntimeError(
        f"no space left on the device{where}: free space there and run the same command again"
    )
    said.kept_work = getattr(error, "kept_work", None)  # type: ignore[attr-defined]
    return said


def _fail(
    command: str,
    exit_code: int,
    error: BaseException,
    note: Sequence[str] = (),
    status: str = "error",
    short: bool = False,
) -> int:
    message = str(error)
    shown = _headline(message) if short else message
    kept = getattr(error, "kept_work", None)
    kept_line = [kept.describe()] if kept else []
    print("\n".join([f"error: {shown}", *note, *kept_line]), file=sys.stderr)
    if command == "convert":
        _summary_line(status, exit_code, error=_headline(message), **_kept_fields(error))
    return exit_code


def _headline(message: str) -> str:
    """The line of an error's text that names it: its first, unless that opens a traceback
    (a runner's text of a worker's error), then the traceback's last line (`Type: text`)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call"):
        named = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
        return named[-1] if named else lines[-1]
    return lines[0]
