"""`convert`'s command line: our flags (the flag table of `ConvertConfig`) apart from Beam's
pipeline flags, each checked by its own parser.

Beam's Dataflow options own `--labels key=value` and `--label key=value` (job labels), which
are also our `--labels FILE` and `--label COLUMN`: a value with '=' (or JSON) is a job label.
Beam only logs "Discarding unparseable args" for a flag it does not know and goes on, so
`--compresion gzip` would convert without compression and exit 0: here an unknown flag is a
`UsageError`, with the closest known flag suggested.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, NoReturn

from apache_beam.options.pipeline_options import PipelineOptions

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError

__all__ = [
    "beam_args",
    "beam_flag_names",
    "beam_options",
    "check_beam_args",
    "given_names",
    "parser",
    "split_argv",
]

# Beam's Dataflow flags whose value tells when they are ours (a job label is `key=value`).
_SHARED = ("--labels", "--label")


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError where it would print its usage and exit the process."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; `{self.prog} --help` lists the flags")


def parser(prog: str = "tfrecord-etl convert", **kwargs: Any) -> argparse.ArgumentParser:
    """An argparse parser of `convert`'s own flags (each gives its text, None when absent)."""
    found = _Parser(prog=prog, allow_abbrev=False, **kwargs)
    flags.add_arguments(found, ConvertConfig)
    return found


# Dataflow's job labels: `key=value` (lowercase letters, digits, _ and -), or a JSON object.
_JOB_LABEL = re.compile(r"[a-z0-9_-]+=[a-z0-9_-]*")


def _job_label(value: str) -> bool:
    """A Dataflow job label, not one of our file or column names (`dt=1/labels.csv` is a
    file: a label's value has no '/' or '.')."""
    return bool(_JOB_LABEL.fullmatch(value)) or value.lstrip().startswith("{")


def _beams_labels(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the args without Beam's job labels, Beam's job-label args)."""
    rest: list[str] = []
    labels: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, value = arg.partition("=")
        if flag in _SHARED and eq and _job_label(value):
            labels.append(arg)
        elif arg in _SHARED and i + 1 < len(argv) and _job_label(argv[i + 1]):
            labels += [arg, argv[i + 1]]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return rest, labels


def split_argv(argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Our flags' texts by flag name (repeated flags: lists), and the args left for Beam."""
    rest, labels = _beams_labels(argv)
    # argparse drops a value that is exactly "--" (its end-of-options marker), even after
    # "=": a marker list of that one marker keeps it with an empty one beside (ignored).
    rest = [a + "," if a == "--null_values=--" else a for a in rest]
    args = flags.bare_values(rest, ConvertConfig)
    ours, beams = parser(add_help=False).parse_known_args(args)
    return {k: v for k, v in vars(ours).items() if v is not None}, beams + labels


def beam_flag_names() -> set[str]:
    """The flags Beam's pipeline options take, without `--` (every registered options class,
    Dask's too), as Beam's own parser lists them."""
    found: dict[str, str] = {}

    def probe(beams_parser: argparse.ArgumentParser) -> None:
        found["usage"] = beams_parser.format_usage()

    _parsed(PipelineOptions([]), probe)
    return set(re.findall(r"--([\w-]+)", found["usage"]))


def _parsed(
    options: PipelineOptions,
    probe: Callable[[Any], None] | None = None,
    args: Sequence[str] | None = None,
) -> None:
    """Parses Beam's options as Beam will; a value an option does not take (argparse would
    print its usage and exit the process) is a UsageError naming the option.

    Dask's options are registered (by importing Beam's Dask runner, which imports Dask: 0.4 s
    of every start) only when `args` mention Dask, or when all options are listed (None)."""
    if args is None or any("dask" in arg.lower() for arg in args):
        from apache_beam.runners.dask import dask_runner  # noqa: F401

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            options.get_all_options(add_extra_args_fn=probe, retain_unknown_options=True)
    except SystemExit:
        lines = [line for line in said.getvalue().splitlines() if line.strip()]
        problem = lines[-1].split("error: ", 1)[-1] if lines else "a Beam option is malformed"
        raise UsageError(f"Beam's pipeline options: {problem}") from None


def check_beam_args(args: Sequence[str]) -> None:
    """Raises UsageError for an arg that no Beam pipeline option takes, or a value it does not
    take, parsed as Beam parses them (every registered options class, no abbreviations)."""
    found: dict[str, list[str]] = {}

    def probe(beams_parser: argparse.ArgumentParser) -> None:
        found["unknown"] = beams_parser.parse_known_args(list(args))[1]

    _parsed(PipelineOptions(list(args)), probe, args)
    unknown = found["unknown"]
    names = [arg.split("=", 1)[0] for arg in unknown if arg.startswith("-")]
    if names:
        raise UsageError(_unknown_flags(names))
    if unknown:
        # Most often a glob the shell expanded: `--input dir/*.csv` gives the first file to
        # --input and the others as loose words, which Beam would ignore.
        raise UsageError(
            f"unexpected argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown[:3])}"
            f"{', ...' if len(unknown) > 3 else ''}: every value belongs to a flag; quote a "
            "pattern so the shell leaves it to us (--input 'dir/*.csv'), or repeat --input for "
            "each file"
        )


def beam_options(options: Mapping[str, Any]) -> PipelineOptions:
    """Beam's options from a dict (`convert`'s `pipeline_options`, keyed by Beam's flag names
    without `--`), checked as the command line's are: UsageError for a key no Beam option
    takes (ours are keywords of `convert` itself) or a value it does not take."""
    ours = {n for f in flags.flags(ConvertConfig) for n in f.names}
    args = beam_args(options)
    misplaced = sorted(set(options) & ours - given_names(_known_args(args)))
    if misplaced:
        raise UsageError(
            f"{', '.join(misplaced)} {'is a flag' if len(misplaced) == 1 else 'are flags'} of "
            "convert: pass it as a keyword of convert(), not in pipeline_options"
        )
    check_beam_args(args)
    return PipelineOptions(args)


def beam_args(options: Mapping[str, Any]) -> list[str]:
    """A dict of Beam's options as its command line, as Beam's `from_dictionary` reads one:
    True is the bare flag, False and None leave it out, a list repeats it, a dict is JSON."""
    args: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        if value is True:
            args.append(f"--{name}")
        elif isinstance(value, (list, tuple)):
            args += [f"--{name}={item}" for item in value]
        elif isinstance(value, dict):
            args.append(f"--{name}={json.dumps(value)}")
        else:
            args.append(f"--{name}={value}")
    return args


def _known_args(args: Sequence[str]) -> list[str]:
    """The args Beam's options know (the others are what check_beam_args refuses)."""
    found: dict[str, list[str]] = {}

    def probe(beams_parser: argparse.ArgumentParser) -> None:
        found["unknown"] = beams_parser.parse_known_args(list(args))[1]

    _parsed(PipelineOptions(list(args)), probe, args)
    return [a for a in args if a not in found["unknown"]]


def _unknown_flags(names: Iterable[str]) -> str:
    known = [f"--{n}" for n in beam_flag_names()]
    known += [f"--{n}" for f in flags.flags(ConvertConfig) for n in f.names]
    problems = []
    for name in names:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        problems.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return (
        f"unknown flag{'s' if len(problems) > 1 else ''}: {', '.join(problems)}; "
        "`tfrecord-etl convert --help` lists convert's flags, and any Beam pipeline option is "
        "accepted too"
    )


def given_names(args: Collection[str]) -> set[str]:
    """The option names of command-line args (`--runner=X` and `--runner X` give `runner`)."""
    return {a.split("=", 1)[0].removeprefix("--") for a in args if a.startswith("--")}
