"""`convert`'s flags: the flag table, and the typed, validated `ConvertConfig` built from it.

Every flag is a field of `ConvertConfig` (or of one of its groups: the CSV `Dialect`, the
`Projection` of columns, the `ShardingOptions` that `WriteShards` shares), defined once with its
default, help and parsing (`beam_jobs.core.flags`). The command line and `beam_jobs.convert`
both build the config with `ConvertConfig.from_flags`: command-line text is parsed, Python
values are taken as they are. Which runner runs the job is `beam_jobs.job.runner`'s business.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.splits import Split, accept_splits, parse_splits
from beam_jobs.core.units import parse_size
from beam_jobs.formats.base import DEFAULT_MAX_RECORD_BYTES, ReadSettings
from beam_jobs.formats.lines.layout import Dialect
from beam_jobs.formats.registry import FORMATS, guess_format
from beam_jobs.schema.projection import Projection

__all__ = ["ConvertConfig", "fill_date", "parse_run_date"]

MIN_SAMPLE_BYTES = 4096
DEFAULT_SAMPLE_BYTES = "1MiB"
_FORMAT_NAMES = ", ".join(FORMATS)


def fill_date(template: str, run_date: str) -> str:
    """Replaces {date} (YYYY-MM-DD) and its parts {yyyy}, {mm}, {dd} in a path or pattern.

    A daily job reads `gs://raw/{date}/*.csv` or `raw/year={yyyy}/month={mm}/day={dd}/*`.
    """
    yyyy, mm, dd = run_date.split("-")
    for name, value in (("date", run_date), ("yyyy", yyyy), ("mm", mm), ("dd", dd)):
        template = template.replace("{" + name + "}", value)
    return template


def parse_run_date(text: str) -> str:
    """`--run_date`: YYYY-MM-DD (fromisoformat alone would also take 20261201)."""
    try:
        if len(text) != 10 or text[4] != "-":
            raise ValueError(text)
        datetime.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--run_date must be YYYY-MM-DD, got {text!r}") from None
    return text


def _accept_date(value: Any) -> str:
    if not isinstance(value, datetime.date):
        raise TypeError(f"must be 'YYYY-MM-DD' or a datetime.date, got {value!r}")
    return value.isoformat()[:10]


def _size(value: Any) -> int:
    return parse_size(flags.whole_number(value))


MIN_STALL_SECONDS = 10.0


def _seconds(flag: str, default: float, least: float = 0.0, **more: Any) -> Any:
    """A flag of a positive number of seconds (at least `least`)."""

    def accept(value: Any) -> float:
        seconds = flags.number(value)
        if not seconds > 0:
            raise UsageError(f"--{flag} must be a positive number of seconds, not {value}")
        if seconds < least:
            raise UsageError(f"--{flag} must be at least {least:g} seconds, not {value}")
        return seconds

    return flags.option(
        default,
        parse=lambda text: accept(flags.parse_float(text)),
        accept=accept,
        recorded=False,
        metavar="S",
        **more,
    )


def _bool(**flag: Any) -> Any:
    return flags.switch(False, **flag)


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """Validated conversion settings; inner code trusts them. Build with `from_flags`."""

    inputs: tuple[str, ...] = flags.option(
        (),
        name="input",
        repeated=True,
        accept=flags.path_value,
        metavar="PATTERN",
        help="Input file or glob pattern (local or gs://); repeat the flag for several. "
        "{date}, {yyyy}, {mm} and {dd} are replaced by --run_date.",
    )
    output: str = flags.option(
        "",
        accept=flags.path_value,
        metavar="DIR",
        help="Directory for the shards, dead letters and manifest.json; {date} is replaced by "
        "--run_date as in --input.",
    )
    format: str = flags.option(
        "csv",
        reading=True,
        metavar="NAME",
        help=f"Input format: {_FORMAT_NAMES} (default: from the --input file extension; "
        ".gz, .bz2 and .zst inputs are decompressed on the fly).",
    )
    dialect: Dialect = flags.group(Dialect)
    schema: str | None = flags.option(
        accept=flags.path_value,
        metavar="FILE",
        help="Feature types that override the inferred ones: the JSON `inspect --schema` "
        "prints (listing only some columns is fine), or a TensorFlow Metadata schema.pbtxt.",
    )
    image_labels: str | None = flags.option(
        aliases=("labels",),
        recorded_as="labels",  # every manifest before 2026-12-05 records it so
        accept=flags.path_value,
        reading=True,
        metavar="FILE",
        help="(Also accepted as --labels FILE.) For --format images: a CSV with a 'filename' "
        "column (relative to the image folder), a 'label' column and optional extra feature "
        "columns. Default: each image's parent folder name is its label.",
    )
    splits: tuple[Split, ...] = flags.option(
        (),
        parse=parse_splits,
        accept=accept_splits,
        metavar="A=W,B=W",
        help="Split the records, e.g. train=80,eval=20 (relative weights): each split gets "
        "its own shards (train-00000-of-00009.tfrecord...) and manifest section.",
    )
    split_key: str | None = flags.option(
        metavar="FEATURE",
        help="Feature whose value decides a record's split (a stable hash); default: the "
        "whole record.",
    )
    projection: Projection = flags.group(Projection)
    label: str | None = flags.option(
        name="label_column",
        aliases=("label",),
        reading=True,
        metavar="COLUMN",
        help="(Also accepted as --label COLUMN.) The label feature, by its output name: "
        "recorded in the manifest, so the reader returns (features, label); a text label "
        "gets a vocabulary (ids in sorted order of the values).",
    )
    sharding: ShardingOptions = flags.group(ShardingOptions)
    sample_bytes: int = flags.option(
        parse_size(DEFAULT_SAMPLE_BYTES),
        parse=parse_size,
        accept=_size,
        reading=True,
        metavar="SIZE",
        help="Bytes read from the head of each sampled file (up to 8) to infer types and "
        f"sizes (default {DEFAULT_SAMPLE_BYTES}).",
    )
    max_record_bytes: int = flags.option(
        DEFAULT_MAX_RECORD_BYTES,
        parse=parse_size,
        accept=_size,
        metavar="SIZE",
        help="A row whose encoded Example is larger goes to the dead letter (default 64MiB).",
    )
    overwrite: bool = _bool(
        bare="true",
        recorded=False,
        help="Convert again even when OUTPUT holds this very conversion, and write into an "
        "OUTPUT that holds other files (only tfrecord-etl's own files are replaced).",
    )
    run_date: str = flags.option(
        "",
        parse=parse_run_date,
        accept=_accept_date,
        recorded=False,
        metavar="YYYY-MM-DD",
        help="Substituted for {date} ({yyyy}, {mm}, {dd}: its parts) in --input and --output, "
        "for daily partitions (default: today, UTC).",
    )
    dry_run: bool = _bool(
        bare="true",
        recorded=False,
        help="Print the shard plan (inputs, features, estimated records, shards and sizes) and "
        "write nothing.",
    )
    wait: bool = flags.switch(
        True,
        recorded=False,
        metavar="true|false",
        help="true (default): wait for the job and print its summary; false: return once "
        "the runner accepted the job (what a Flex Template launcher does).",
    )
    progress_seconds: float = _seconds(
        "progress_seconds",
        5.0,
        help="How often a waiting launcher reports progress (share of the input read, time "
        "left, shards done, records, input MB/s, worker processes; a live bar on a "
        "terminal); default 5.",
    )
    fresh: bool = _bool(
        bare="true",
        recorded=False,
        help="Discard the finished work a failed run of this conversion kept in OUTPUT and "
        "convert from the start (by default a rerun of the same command checks and reuses "
        "it).",
    )
    stall_seconds: float = _seconds(
        "stall_seconds",
        1800.0,
        least=MIN_STALL_SECONDS,
        help="End a run whose progress (tasks started or finished, records read, publishing "
        "steps) stands still this long, with an error naming the stage and what it waited "
        f"for; its finished work is kept for a rerun (default 1800, at least "
        f"{MIN_STALL_SECONDS:g}: workers take seconds to start).",
    )
    plan_only: bool = False  # `inspect --input`: no output folder to check or write

    def __post_init__(self) -> None:
        if not self.inputs:
            raise UsageError("--input is required: a file or glob pattern, e.g. 'data/*.csv'")
        if not self.output and not self.plan_only:
            raise UsageError("--output is required: the directory for shards and manifest.json")
        if set(self.output) & set("*?[]"):
            # Beam's file systems read such a path as a pattern when listing and deleting.
            raise UsageError(f"--output {self.output} holds a glob character (* ? [ ]); rename it")
        if self.format not in FORMATS:
            raise UsageError(f"--format must be one of {_FORMAT_NAMES}, got {self.format!r}")
        dialect = self.dialect
        if (
            dialect.delimiter
            or dialect.column_names
            or dialect.skip_header_lines
            or dialect.null_values is not None
        ) and self.format != "csv":
            raise UsageError(
                "--delimiter, --column_names, --skip_header_lines and --null_values are for "
                "--format csv only"
            )
        if dialect.encoding != "utf-8" and self.format not in ("csv", "text"):
            raise UsageError(
                f"--encoding is for --format csv and text; {self.format} input is UTF-8 by "
                "definition"
            )
        if self.image_labels and self.format != "images":
            raise UsageError("--labels (--image_labels) is for --format images only")
        if self.split_key and not self.splits:
            raise UsageError("--split_key needs --splits, e.g. --splits train=80,eval=20")
        if self.max_record_bytes < 1:
            raise UsageError(f"--max_record_bytes must be at least 1, got {self.max_record_bytes}")
        if self.sample_bytes < MIN_SAMPLE_BYTES:
            raise UsageError(
                f"--sample_bytes must be at least {MIN_SAMPLE_BYTES}, got {self.sample_bytes}"
            )

    @classmethod
    def from_flags(cls, given: Mapping[str, Any], plan_only: bool = False) -> ConvertConfig:
        """The config of flags given by name (command-line text, or Python values from
        `beam_jobs.convert`); absent or None: the default. `{date}` in `--input` and `--output`
        is filled in, and the format guessed from the inputs when not given.

        Raises:
          UsageError: naming the bad flag, or an unknown one.
        """
        unknown = sorted(set(given) - {n for f in flags.flags(cls) for n in f.names})
        if unknown:
            raise UsageError(
                f"unknown flag{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                "`tfrecord-etl convert --help` lists them"
            )
        kwargs = flags.values(cls, given)
        run_date = kwargs.get("run_date") or (
            datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        )
        inputs = tuple(fill_date(pattern, run_date) for pattern in kwargs.get("inputs", ()))
        format_name = kwargs.get("format") or (guess_format(inputs) if inputs else "csv")
        if format_name is None:
            raise UsageError(
                f"cannot tell the input format from {list(inputs)}; pass --format ({_FORMAT_NAMES})"
            )
        output = fill_date(kwargs.get("output", ""), run_date).rstrip("/")
        return cls(
            **kwargs
            | {
                "inputs": inputs,
                "output": output,
                "format": format_name,
                "run_date": run_date,
                "plan_only": plan_only,
            }
        )

    def read_settings(self) -> ReadSettings:
        """How the inputs are read, for the input format."""
        columns = self.projection.columns
        return ReadSettings(
            patterns=self.inputs,
            dialect=self.dialect,
            image_labels=self.image_labels,
            kept=frozenset(columns) if columns else None,
            max_record_bytes=self.max_record_bytes,
            sample_bytes=self.sample_bytes,
        )

    def to_json(self) -> dict[str, Any]:
        """The options that define the conversion, as recorded in the manifest."""
        return flags.recorded(self)
