"""`convert(...)`: one conversion from Python, with keyword arguments that mirror the flags.

    from beam_jobs import convert
    result = convert(input="raw/*.csv", output="out", target_shard_bytes="64MiB",
                     splits={"train": 80, "eval": 20}, pipeline_options={"direct_num_workers": 2})
    result.manifest.total_records

The keywords are the flag names without `--` (`label` and `labels` as on the command line);
values may be text, as on the command line, or Python values: a list for a repeated or
comma-separated flag, a dict for `splits` and `rename`, a bool for `overwrite`, `wait` and
`dry_run`, an int for sizes and counts, a `pathlib.Path` for paths. They build the same
`ConvertConfig` as the command line, without being rendered as text first. The run is the same
as `tfrecord-etl convert` (same checks, same typed errors), without the end-of-run printout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError
from beam_jobs.job.argv import beam_options
from beam_jobs.job.launcher import ConvertResult, run_config
from beam_jobs.job.quiet import beam_errors_quiet

__all__ = ["convert", "convert_config"]


def convert_config(
    input: str | PathLike[str] | Sequence[str | PathLike[str]],
    output: str | PathLike[str],
    **options: Any,
) -> ConvertConfig:
    """The `ConvertConfig` that `convert(input, output, **options)` runs.

    Raises:
      UsageError: naming an unknown keyword or a value its flag does not take.
    """
    flags.check_keywords(
        ConvertConfig, options, "convert()", "; Beam's own options go in pipeline_options={...}"
    )
    return ConvertConfig.from_flags({"input": input, "output": output, **options})


def convert(
    input: str | PathLike[str] | Sequence[str | PathLike[str]],
    output: str | PathLike[str],
    *,
    pipeline_options: Mapping[str, Any] | None = None,
    verbose: bool = False,
    **options: Any,
) -> ConvertResult:
    """Converts `input` (a pattern or a list of them) into shards and a manifest in `output`.

    Args:
      input: file or glob pattern(s), local or gs://.
      output: the dataset folder.
      pipeline_options: Beam's options, e.g. {"runner": "DaskRunner", "direct_num_workers": 2}.
      verbose: let Beam log a failing step and its workers print their tracebacks (by
        default the error is raised once, as ours, without them).
      **options: the flags of `tfrecord-etl convert`, e.g. target_shard_bytes="64MiB",
        compression="gzip", splits={"train": 80, "eval": 20}, columns=["a", "b"], label="y".

    Returns:
      The `ConvertResult`: its `status`, `manifest`, `converted` (False when the output
      already held this conversion, or for `dry_run=True`, whose `plan` is given instead).

    Raises:
      UsageError, DataError, TooManyBadRecords, OutputBusy: as the command reports them.
    """
    config = convert_config(input, output, **options)
    if pipeline_options is None:
        pipeline_options = {}
    if not isinstance(pipeline_options, Mapping):
        raise UsageError(
            "pipeline_options must be a dict of Beam's options, e.g. "
            f"{{'direct_num_workers': 2}}; got {type(pipeline_options).__name__}"
        )
    given = {k: v for k, v in pipeline_options.items() if v is not None}
    with contextlib.nullcontext() if verbose else beam_errors_quiet():
        return run_config(config, beam_options(given), given)
