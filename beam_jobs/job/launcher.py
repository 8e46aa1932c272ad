"""The launcher's side of `convert`: plan, check the output folder, run the pipeline, and
return what was published."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core.errors import Stalled, TooManyBadRecords, recover
from beam_jobs.core.units import count_of, format_size
from beam_jobs.core.version import __version__
from beam_jobs.formats.lines.cut_counts import CutCounts, count_segment
from beam_jobs.job import interrupt, on_dask, resume, watchdog
from beam_jobs.job.argv import check_beam_args, split_argv
from beam_jobs.job.runner import choose_runner
from beam_jobs.plan.conversion import ConversionPlan, make_plan
from beam_jobs.plan.shuffle import ShuffleUnit
from beam_jobs.plan.warnings import plan_warnings
from beam_jobs.publish import journal, lease
from beam_jobs.publish.output_dir import load_manifest, prepare_output
from beam_jobs.sink.progress import ProgressReporter, task_note_name, unit_note_name
from beam_jobs.sink.temp_folder import mark_stopped
from beam_jobs.transforms.convert_to_shards import (
    ConvertToShards,
    counted_by_launcher,
    cut_segments,
)
from tfdata_reader.manifest import Manifest, shard_name

__all__ = ["ConvertResult", "ConvertStatus", "empty_splits", "run", "run_config"]

_log = logging.getLogger(__name__)


class ConvertStatus(str, enum.Enum):
    """How a conversion ended, as the last line of `convert` says it (`"status"`)."""

    CONVERTED = "ok"
    ALREADY_CONVERTED = "already_converted"  # the output held this very conversion
    DRY_RUN = "dry_run"
    SUBMITTED = "submitted"  # --wait=false: the runner accepted the job


@dataclasses.dataclass(frozen=True)
class ConvertResult:
    """What a conversion did: its status, the published manifest (None for a dry run, whose
    plan is given instead, and for a submitted job, whose id is given)."""

    config: ConvertConfig
    status: ConvertStatus
    manifest: Manifest | None = None
    plan: ConversionPlan | None = None
    submitted_job: str | None = None  # with --wait=false: the runner's job id

    @property
    def converted(self) -> bool:
        """True when this run wrote the dataset."""
        return self.status is ConvertStatus.CONVERTED


def run(argv: Sequence[str]) -> ConvertResult:
    """Runs one conversion with command-line arguments (what `tfrecord-etl convert` runs): our
    flags and any Beam pipeline flag.

    Raises:
      UsageError: for bad or unknown flags, or inputs that match nothing.
      DataError: for input that cannot be converted (the message names the file and where).
      OutputBusy: when another conversion is writing the output folder.
    """
    ours, beams = split_argv(argv)
    check_beam_args(beams)
    config = ConvertConfig.from_flags(ours)
    return run_config(config, PipelineOptions(beams), beams)


def run_config(
    config: ConvertConfig, options: PipelineOptions, given: Iterable[str] = ()
) -> ConvertResult:
    """Runs one conversion of a validated config with Beam's pipeline options (`given`: the
    Beam options the user gave, which the runner choice keeps as they are).

    A rerun with the same input files (paths and sizes) and options into an output that holds
    the complete manifest of that conversion does nothing (`ALREADY_CONVERTED`) unless
    `overwrite`. The run holds the output folder's lease from before it looks at the folder
    until it ends (`wait=False`: until the submitted job publishes).
    """
    plan = make_plan(config)
    choose_runner(options, given, plan.input_bytes, plan.per_column_bound)
    dask = on_dask.is_dask(options)
    if dask:
        on_dask.prepare(options, len(plan.tasks), config.wait)
    if config.dry_run:
        return ConvertResult(config, ConvertStatus.DRY_RUN, plan=plan)
    with contextlib.ExitStack() as cluster:
        address = None
        if dask:  # connected before anything is written: a bad address leaves no trace
            paths = [*(f.path for f in plan.files), config.output]
            address = cluster.enter_context(on_dask.cluster(options, paths))
        return _convert(options, config, plan, address)


def _convert(
    options: PipelineOptions, config: ConvertConfig, plan: ConversionPlan, dask_address: str | None
) -> ConvertResult:
    """Holds the output's lease, checks the folder, takes over a failed run's finished work
    (or starts anew) and runs (`dask_address`: the scheduler's, when on Dask)."""
    run_id = uuid.uuid4().hex[:12]
    ttl = lease.TTL_SECONDS if config.wait else lease.SUBMITTED_TTL_SECONDS
    held = lease.acquire(config.output, run_id, ttl)  # OutputBusy when another run writes there
    submitted = False
    try:
        key = resume.work_key(config, plan)
        if not config.fresh:  # a publishing of this very conversion, stopped half way
            finished = resume.finish_publishing(config.output, key)
            if finished is not None:
                return ConvertResult(config, ConvertStatus.CONVERTED, finished)
        options_json = config.to_json()
        if prepare_output(
            config.output, options_json, plan.files_json(), config.overwrite, plan.features
        ):
            resume.discard_all(config.output)  # a finished run's leftovers: nothing to resume
            manifest = load_manifest(config.output)
            _log.info(
                "%s already holds this conversion (same input files, options and features, every "
                "shard in place; %s); nothing to do (pass --overwrite to convert again)",
                config.output,
                manifest.fingerprint,
            )
            return ConvertResult(config, ConvertStatus.ALREADY_CONVERTED, manifest)
        _log.info(
            "plan: %s (%s input, %s), %s, %s%s of about %s%s",
            count_of(len(plan.files), "input file"),
            config.format,
            format_size(plan.input_bytes),
            count_of(len(plan.features), "feature"),
            count_of(len(plan.shards), "shard"),
            _per_split(plan),
            format_size(plan.estimated_output_bytes / len(plan.shards)),
            " each" if len(plan.shards) > 1 else "",
        )
        for warning in plan_warnings(plan):
            _log.warning("%s", warning)
        work = resume.open_work(config.output, key, run_id, config.fresh)
        with _failures_reported(work.folder, _planned_tasks(plan)):
            counts = resume.kept_counts(work, lambda: _counted_here(plan, dask_address))
            transform = ConvertToShards(plan, config, __version__, run_id, counts, key.work)
            if not config.wait:
                # A Flex Template launcher: submit and return; the job publishes the manifest
                # and releases the lease itself.
                job_id = _submit(options, transform)
                lease.renew(config.output, held, ttl, job=job_id)
                submitted = True
                return ConvertResult(config, ConvertStatus.SUBMITTED, submitted_job=job_id)
            _run(options, transform, work.folder, plan, config, held)
        manifest = load_manifest(config.output)
        for warning in empty_splits(manifest):
            _log.warning("%s", warning)
        return ConvertResult(config, ConvertStatus.CONVERTED, manifest)
    finally:
        if not submitted:
            lease.release(config.output, run_id)


def _counted_here(plan: ConversionPlan, dask_address: str | None) -> CutCounts | None:
    """The counts before each cut that the launcher makes (None: a pipeline stage counts): a
    small local input's here (quicker than a stage), a large one's on Dask, once (the
    DaskRunner would count in every task that reads the counts)."""
    segments = cut_segments(plan)
    if not segments:
        return None
    if counted_by_launcher(segments):
        return CutCounts.from_counted(count_segment(s) for s in segments)
    if dask_address:
        return on_dask.count_cuts(dask_address, segments)
    return None


def _planned_tasks(plan: ConversionPlan) -> int:
    """The tasks a run counts: its write tasks and its shuffle's units."""
    return len(plan.tasks) + (len(plan.shuffle.units()) if plan.shuffle else 0)


def _submit(options: PipelineOptions, transform: ConvertToShards) -> str:
    """Starts the job and returns its id (a local runner runs it to its end right here)."""
    pipeline = beam.Pipeline(options=options)
    _ = pipeline | "ConvertToShards" >> transform
    job = pipeline.run()
    return str((job.job_id() if hasattr(job, "job_id") else "") or "?")


@contextlib.contextmanager
def _failures_reported(folder: str, planned: int) -> Iterator[None]:
    """A run that fails (an error, a signal, a stall) keeps its finished work for a rerun (the
    error says where: `kept_work`), and a worker's typed error is raised as it is."""
    try:
        yield
    except BaseException as e:  # also an interruption (Ctrl-C, SIGTERM)
        # The bad-row budget is checked once every task has ended; other failures may leave
        # tasks at work for a moment.
        budget = isinstance(e, Exception) and isinstance(recover(e) or e, TooManyBadRecords)
        kept = _keep_quietly(folder, planned, not budget)
        ours = recover(e) if isinstance(e, Exception) else None
        signum = interrupt.deferred()
        raised: BaseException = ours if ours is not None else e
        if signum is not None and not isinstance(e, interrupt.Interrupted):
            # Put off while publishing began, and publishing then stopped: interrupted.
            raised = interrupt.Interrupted(signum)
        raised.kept_work = kept  # type: ignore[attr-defined]
        if raised is e:
            raise
        raise raised from e


def _keep_quietly(folder: str, planned: int, running: bool = True) -> resume.KeptWork | None:
    """What the failed run leaves for a rerun; a failure to tidy it is only logged."""
    try:
        return resume.keep_on_failure(folder, planned, running)
    except Exception as e:
        _log.warning("could not tidy the work folder %s: %s", folder, e)
        return resume.kept_as_is(folder, planned)


def _publishing_begun(folder: str) -> bool:
    """For a signal: marks the run stopped (its tasks stop at their next check) unless its
    publishing began (its journal is written) or ended (the folder is gone): True then, and
    the signal waits for publishing to finish."""
    if not mark_stopped(folder):
        return True
    return journal.is_begun(folder)


def _run(
    options: PipelineOptions,
    transform: ConvertToShards,
    folder: str,
    plan: ConversionPlan,
    config: ConvertConfig,
    held: lease.Lease,
) -> None:
    """Runs the pipeline to its end, with progress, the stall watchdog and the lease's
    heartbeat; a signal once publishing began waits for it."""
    unit = "write tasks" if plan.writes_parts else "shards"
    # On a terminal a live bar; in a log (a scheduler, a pipe), a line every few seconds.
    live = sys.stderr.isatty()
    units = plan.shuffle.units() if plan.shuffle else []
    reporter = ProgressReporter(
        folder, len(plan.tasks), config.progress_seconds, unit, plan.input_bytes, live, len(units)
    )
    expected = watchdog.Expected(
        tuple(task_note_name(task, plan.sharding) for task in plan.tasks),
        tuple(_unit_name(plan, u) for u in units),
    )
    result: list[Any] = []  # the runner's, once it runs (a Dask run is cancelled on a stall)

    def stop(error: BaseException) -> None:
        if not interrupt.stop_main(error) and result:  # not the main thread: cancel the job
            with contextlib.suppress(Exception):
                result[0].cancel()

    def on_stall(message: str) -> None:
        _log.error("%s; stopping the run", message)
        stop(Stalled(message))

    def on_published() -> None:
        _log.warning("the dataset is published, but the runner has not said so: not waiting")
        stop(_Published())

    interrupt.forget_deferred()  # a signal put off by an earlier run of this process
    where = (folder, config.output, held.run_id)
    watch = watchdog.Watchdog(
        reporter, expected, config.stall_seconds, where, plan.files_json(), on_stall, on_published
    )
    reporter.start()
    watch.start()
    heartbeat = lease.Heartbeat(config.output, held).start()
    try:
        with interrupt.stoppable(), interrupt.deferred_while(lambda: _publishing_begun(folder)):
            _run_pipeline(options, transform, result)
    except _Published:
        pass  # over, whatever the runner says
    finally:
        heartbeat.stop()
        watch.stop()
        reporter.stop()


def _run_pipeline(options: PipelineOptions, transform: ConvertToShards, result: list[Any]) -> None:
    """Runs the conversion's pipeline to its end (`result`: gets the runner's result)."""
    pipeline = beam.Pipeline(options=options)
    _ = pipeline | "ConvertToShards" >> transform
    result.append(pipeline.run())
    try:
        result[0].wait_until_finish()
    except BaseException as e:
        # An interruption or a failed task: stop what still runs (Dask tasks would go on
        # writing into the work folder).
        if not isinstance(e, _Published):
            with contextlib.suppress(Exception):
                result[0].cancel()
        raise
    finally:
        _close_client(result[0])


class _Published(BaseException):
    """The watchdog's word that the run's dataset is published (its runner never said so)."""


def _unit_name(plan: ConversionPlan, unit: ShuffleUnit) -> str:
    """A shuffle unit's note name (`sink.progress.unit_note_name`, without its folder)."""
    sharding = plan.sharding
    prefix = unit.split or sharding.shard_prefix
    name = shard_name(prefix, unit.shard, unit.num_shards, sharding.compression)
    return unit_note_name(name, unit.part).split("/", 1)[1]


def _close_client(result: object) -> None:
    """Disconnects a DaskRunner result's client (local runners have none)."""
    client = getattr(result, "client", None)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()


def empty_splits(manifest: Manifest) -> list[str]:
    """A warning for each split that got no record (a small input, or a small weight)."""
    total = manifest.total_records
    weights = sum(manifest.splits.values())
    return [
        f"split {name!r} got no record (weight {summary['weight']} of {weights}, "
        f"{count_of(total, 'record')} in all): reading it gives no batch; use fewer splits or "
        "more rows"
        for name, summary in manifest.split_summary().items()
        if summary["records"] == 0
    ]


def _per_split(plan: ConversionPlan) -> str:
    if not plan.splits:
        return ""
    return f" ({', '.join(f'{name} {n}' for name, n in plan.shards_per_split().items())})"
