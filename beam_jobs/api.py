"""`convert(...)`: one conversion from Python, with keyword arguments that mirror the flags.

    from beam_jobs import convert
    result = convert(input="raw/*.csv", output="out", target_shard_bytes="64MiB",
                     splits={"train": 80, "eval": 20}, pipeline_options={"direct_num_workers": 2})
    result.manifest.total_records

The keywords are the flag names without `--` (`label` and `labels` as on the command line);
values may be Python values: a list for a repeated or comma-separated flag, a dict for
`splits` and `rename`, a bool for `overwrite`, `wait` and `dry_run`. The run is the same as
`tfrecord-etl convert` (same checks, same typed errors), without the end-of-run printout.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from beam_jobs.errors import UsageError
from beam_jobs.launcher import ConvertResult, run

__all__ = ["convert"]

# Keywords that are not spelled as their flag's destination.
_ALIASES = {"label": "label_column", "labels": "image_labels"}
# Flags of ours that another options class defines (Beam's TestOptions owns --dry_run).
_ELSEWHERE = {"dry_run"}


def _known_keywords() -> set[str]:
    from beam_jobs.options import ConvertOptions

    parser = argparse.ArgumentParser()
    ConvertOptions._add_argparse_args(parser)
    return {action.dest for action in parser._actions} | set(_ALIASES) | _ELSEWHERE


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def to_argv(
    input: str | Sequence[str],
    output: str,
    options: Mapping[str, Any],
    pipeline_options: Mapping[str, Any] | None = None,
) -> list[str]:
    """The command line `convert(...)` runs (pure; raises UsageError for an unknown keyword)."""
    known = _known_keywords()
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(
            f"convert() got unknown keyword argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}; Beam's own options go in pipeline_options={{...}}"
        )
    patterns = [input] if isinstance(input, str) else list(input)
    argv = [arg for pattern in patterns for arg in ("--input", str(pattern))]
    argv += ["--output", str(output)]
    for name, value in options.items():
        if value is not None:
            argv.append(f"--{_ALIASES.get(name, name)}={_text(value)}")
    for name, value in (pipeline_options or {}).items():
        if value is not None:
            argv.append(f"--{name}={_text(value)}")
    return argv


def convert(
    input: str | Sequence[str],
    output: str,
    *,
    pipeline_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> ConvertResult:
    """Converts `input` (a pattern or a list of them) into shards and a manifest in `output`.

    Args:
      input: file or glob pattern(s), local or gs://.
      output: the dataset folder.
      pipeline_options: Beam's options, e.g. {"runner": "DaskRunner", "direct_num_workers": 2}.
      **options: the flags of `tfrecord-etl convert`, e.g. target_shard_bytes="64MiB",
        compression="gzip", splits={"train": 80, "eval": 20}, columns=["a", "b"], label="y".

    Returns:
      The `ConvertResult`: `manifest`, `converted` (False when the output already held this
      conversion, or for `dry_run=True`, whose `plan` is given instead).

    Raises:
      UsageError, DataError, TooManyBadRecords, OutputBusy: as the command reports them.
    """
    return run(to_argv(input, output, options, pipeline_options))
