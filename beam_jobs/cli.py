"""Command-line interface: `tfrecord-etl convert | inspect | verify` (also `python -m beam_jobs`).

Exit codes: 0 success; 1 a data problem (more bad rows than --max_bad_fraction, input that is not
CSV, a shard that fails `verify`, a missing or malformed manifest); 2 a usage error (bad flag
value, an input pattern that matches nothing, an output that is a file or holds foreign files).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

from beam_jobs.version import __version__

__all__ = ["main"]

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2

_USAGE = """\
usage: tfrecord-etl {convert,inspect,verify} ...

  convert --input PATTERN --output DIR [--format csv] [--schema FILE]
          [--target_shard_bytes 256MiB | --num_shards N] [--compression none|gzip]
          [--shard_prefix data] [any Beam pipeline flag, e.g. --runner DataflowRunner]
  inspect DIR [--schema]     summary of a converted dataset (or its schema as JSON)
  verify DIR                 re-read every shard and check it against the manifest

`tfrecord-etl convert --help` lists convert's flags.
"""


def _convert(argv: list[str]) -> int:
    from beam_jobs.convert import run
    from beam_jobs.report import summarize_run

    if "-h" in argv or "--help" in argv:
        from beam_jobs.options import ConvertOptions

        parser = argparse.ArgumentParser(
            prog="tfrecord-etl convert",
            description="Convert raw files into size-targeted TFRecord shards and a manifest. "
            "Any Beam pipeline flag is accepted too; without --runner the job runs on the local "
            "FnApiRunner with one worker process per core.",
        )
        ConvertOptions._add_argparse_args(parser)
        parser.print_help()
        return EXIT_OK
    started = time.monotonic()
    result = run(argv)
    if result.converted:
        print(summarize_run(result.manifest, time.monotonic() - started))
    else:
        print(
            f"already converted: the output holds a complete manifest of these inputs and options "
            f"({result.manifest.total_records:,} records in {len(result.manifest.shards)} shards); "
            "pass --overwrite to convert again"
        )
    return EXIT_OK


def _inspect(argv: list[str]) -> int:
    from beam_jobs.report import describe
    from beam_jobs.verify import load_manifest
    from tfdata_reader.manifest import schema_to_json

    parser = argparse.ArgumentParser(prog="tfrecord-etl inspect")
    parser.add_argument("output", help="a conversion's output directory")
    parser.add_argument(
        "--schema", action="store_true", help="print only the feature spec, as --schema JSON"
    )
    args = parser.parse_args(argv)
    manifest = load_manifest(args.output)
    print(schema_to_json(manifest.features) if args.schema else describe(manifest, args.output))
    return EXIT_OK


def _verify(argv: list[str]) -> int:
    from beam_jobs.verify import verify

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
        f"verify ok: {len(manifest.shards)} shards, {manifest.total_records:,} records "
        f"match {args.output}/manifest.json"
    )
    return EXIT_OK


_COMMANDS = {"convert": _convert, "inspect": _inspect, "verify": _verify}


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
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("beam_jobs").setLevel(logging.INFO)
    # Local worker processes relay every startup notice as a warning; errors still show.
    logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)

    from beam_jobs.csv_source import CsvDataError
    from beam_jobs.options import UsageError
    from tfdata_reader.manifest import ManifestError

    try:
        return command(argv[1:])
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (CsvDataError, ManifestError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_DATA
