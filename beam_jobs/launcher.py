"""The launcher's side of `convert`: plan, check the output folder, run the pipeline, and
return what was published."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_jobs.errors import recover
from beam_jobs.options import ConvertConfig
from beam_jobs.pipeline import ConvertToShards
from beam_jobs.plan.conversion import ConversionPlan, make_plan
from beam_jobs.runner import choose_runner, normalize_argv
from beam_jobs.sink.output_dir import load_manifest, prepare_output, remove_folder
from beam_jobs.sink.progress import ProgressReporter
from beam_jobs.units import format_size
from beam_jobs.version import __version__
from tfdata_reader.manifest import Manifest

__all__ = ["ConvertResult", "run"]

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ConvertResult:
    """The published manifest and whether this run wrote it (False: it was already there, or
    this was a dry run, whose plan is given instead)."""

    config: ConvertConfig
    manifest: Manifest | None  # None for a dry run
    converted: bool
    plan: ConversionPlan | None = None
    submitted_job: str | None = None  # with --wait=false: the runner's job id


def run(argv: Sequence[str]) -> ConvertResult:
    """Runs one conversion with command-line style arguments.

    A rerun with the same input files (paths and sizes) and options into an output that holds
    the complete manifest of that conversion does nothing (`converted=False`) unless
    `--overwrite`.

    Raises:
      UsageError: for bad flags or inputs that match nothing.
      DataError: for input that cannot be read as CSV (the message names file and bytes).
    """
    argv = normalize_argv(argv)
    options = PipelineOptions(argv)
    config = ConvertConfig.from_options(options)
    plan = make_plan(config)
    choose_runner(options, argv, plan.input_bytes)
    if config.dry_run:
        return ConvertResult(config, None, converted=False, plan=plan)
    if prepare_output(config, plan.files_json()):
        _log.info(
            "%s already holds this conversion (same input files and options); nothing to do "
            "(pass --overwrite to convert again)",
            config.output,
        )
        return ConvertResult(config, load_manifest(config.output), converted=False)
    _log.info(
        "plan: %d %s input files (%s), %d features, %d shards%s of about %s each",
        len(plan.files),
        config.format,
        format_size(plan.input_bytes),
        len(plan.features),
        len(plan.shards),
        _per_split(plan),
        format_size(plan.estimated_output_bytes / len(plan.shards)),
    )
    transform = ConvertToShards(plan, config, __version__)
    if not config.wait:
        # A Flex Template launcher: submit and return; the job publishes the manifest itself.
        pipeline = beam.Pipeline(options=options)
        _ = pipeline | "ConvertToShards" >> transform
        job = pipeline.run()
        job_id = job.job_id() if hasattr(job, "job_id") else ""
        return ConvertResult(config, None, converted=False, submitted_job=str(job_id or "?"))
    reporter = ProgressReporter(transform.temp_dir, len(plan.shards)).start()
    try:
        with beam.Pipeline(options=options) as pipeline:
            _ = pipeline | "ConvertToShards" >> transform
    except Exception as e:
        _remove_quietly(transform.temp_dir)
        ours = recover(e)  # a worker's DataError arrives as the runner's text
        if ours is not None:
            raise ours from e
        raise
    finally:
        reporter.stop()
    return ConvertResult(config, load_manifest(config.output), converted=True)


def _per_split(plan: ConversionPlan) -> str:
    if not plan.splits:
        return ""
    return f" ({', '.join(f'{name} {n}' for name, n in plan.shards_per_split().items())})"


def _remove_quietly(path: str) -> None:
    """Deletes a failed run's temporary shards; a leftover is harmless, so errors are logged."""
    try:
        remove_folder(path)
    except Exception as e:
        _log.warning("could not remove temporary folder %s: %s", path, e)
