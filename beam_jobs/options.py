"""`convert`'s flags as Beam pipeline options, validated once into a typed `ConvertConfig`.

The defaults and accepted values of every flag are defined here once; `WriteShards` takes the
same defaults. Which runner runs the job, and how the raw argv is normalized first, is
`beam_jobs.runner`'s business.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, TestOptions

from beam_jobs.errors import UsageError
from beam_jobs.formats import FORMAT_NAMES, guess_format
from beam_jobs.formats.csv.dialect import Dialect, parse_delimiter, parse_encoding
from beam_jobs.schema.projection import Projection, parse_columns, parse_renames
from beam_jobs.sink.deflate import DEFAULT_LEVEL as DEFAULT_GZIP_LEVEL
from beam_jobs.sink.deflate import LEVELS as GZIP_LEVELS
from beam_jobs.units import parse_size
from tfdata_reader.manifest import COMPRESSIONS, NAME_RULE, is_valid_name

__all__ = ["ConvertConfig", "ConvertOptions", "fill_date", "parse_splits"]

MIN_TARGET_SHARD_BYTES = 1024
MIN_SAMPLE_BYTES = 4096
DEFAULT_TARGET_SHARD_BYTES = "256MiB"
DEFAULT_MAX_BAD_FRACTION = 0.001
DEFAULT_MAX_RECORD_BYTES = "64MiB"
DEFAULT_SAMPLE_BYTES = "1MiB"
DEFAULT_SHARD_PREFIX = "data"


class ConvertOptions(PipelineOptions):
    """Flags of `tfrecord-etl convert`."""

    @classmethod
    def _add_argparse_args(cls, parser: Any) -> None:
        parser.add_argument(
            "--input",
            action="append",
            help="Input file or glob pattern (local or gs://); repeat the flag for several. "
            "{date}, {yyyy}, {mm} and {dd} are replaced by --run_date.",
        )
        parser.add_argument("--output", help="Output directory for shards and manifest.json.")
        parser.add_argument(
            "--format",
            default=None,
            help=f"Input format: {', '.join(FORMAT_NAMES)} (default: from the --input file "
            "extension; .gz, .bz2 and .zst inputs are decompressed on the fly).",
        )
        parser.add_argument(
            "--delimiter",
            default=None,
            help="CSV field delimiter: one character, or tab, \\t, semicolon, pipe (default: "
            "detected: tab for .tsv files, else the one of tab, ; and | that a header without "
            "commas holds, else a comma).",
        )
        parser.add_argument(
            "--column_names",
            default=None,
            help="CSV files have no header line: their columns, e.g. id,name,score.",
        )
        parser.add_argument(
            "--encoding",
            default="utf-8",
            help="CSV and text: the files' text encoding, e.g. latin-1 or cp1252 (default "
            "utf-8); read as UTF-8 from then on.",
        )
        parser.add_argument(
            "--skip_header_lines",
            type=int,
            default=0,
            help="CSV: lines at the start of each file to skip before the header (or the data).",
        )
        parser.add_argument(
            "--image_labels",
            default=None,
            help="(Also accepted as --labels FILE.) For --format images: a CSV with a "
            "'filename' column (relative to the image folder), a 'label' column and optional "
            "extra feature columns. Default: each image's parent folder name is its label.",
        )
        parser.add_argument(
            "--splits",
            default=None,
            help="Split the records, e.g. train=80,eval=20 (relative weights): each split gets "
            "its own shards (train-00000-of-00009.tfrecord...) and manifest section.",
        )
        parser.add_argument(
            "--split_key",
            default=None,
            help="Feature whose value decides a record's split (a stable hash); default: the "
            "whole record.",
        )
        parser.add_argument(
            "--columns",
            default=None,
            help="Keep only these columns (features), in this order, e.g. id,text,label; the "
            "others are not converted, so their values are never bad rows.",
        )
        parser.add_argument(
            "--rename",
            default=None,
            help="Rename columns in the output: old=new pairs, e.g. y=label,txt=text.",
        )
        parser.add_argument(
            "--label_column",
            default=None,
            help="(Also accepted as --label COLUMN.) The label feature, by its output name: "
            "recorded in the manifest, so the reader returns (features, label); a text label "
            "gets a vocabulary (ids in sorted order of the values).",
        )
        parser.add_argument(
            "--schema",
            help="JSON file with feature types that override the inferred ones "
            "(the format `inspect --schema` prints; listing only some columns is fine).",
        )
        parser.add_argument(
            "--target_shard_bytes",
            default=DEFAULT_TARGET_SHARD_BYTES,
            help="Wanted size of one shard on disk, e.g. 100MB, 256MiB, 1GiB (default 256MiB).",
        )
        parser.add_argument(
            "--num_shards",
            type=int,
            default=None,
            help="Write exactly this many shards instead of sizing them.",
        )
        parser.add_argument(
            "--compression",
            default="none",
            help=f"Shard compression: {' or '.join(COMPRESSIONS)}.",
        )
        parser.add_argument(
            "--compression_level",
            type=int,
            default=DEFAULT_GZIP_LEVEL,
            help=(
                "GZIP level, 1 (fastest; the default) to 9 (smallest): 1-3 use ISA-L, 4-9 zlib "
                "(zlib's and TensorFlow's default is 6)."
            ),
        )
        parser.add_argument(
            "--shard_prefix",
            default=DEFAULT_SHARD_PREFIX,
            help=f"Shard file name prefix, {NAME_RULE} (default {DEFAULT_SHARD_PREFIX}).",
        )
        parser.add_argument(
            "--max_bad_fraction",
            type=float,
            default=DEFAULT_MAX_BAD_FRACTION,
            help="Largest share of input rows that may fail to convert (they go to "
            "OUTPUT/dead_letter/); above it the job fails and publishes no manifest "
            f"(default {DEFAULT_MAX_BAD_FRACTION}).",
        )
        parser.add_argument(
            "--max_record_bytes",
            default=DEFAULT_MAX_RECORD_BYTES,
            help="A row whose encoded Example is larger goes to the dead letter "
            f"(default {DEFAULT_MAX_RECORD_BYTES}).",
        )
        parser.add_argument(
            "--run_date",
            default=None,
            help="YYYY-MM-DD substituted for {date} ({yyyy}, {mm}, {dd}: its parts) in --input "
            "and --output, for daily partitions (default: today, UTC).",
        )
        parser.add_argument(
            "--wait",
            default="true",
            help="true (default): wait for the job and print its summary; false: return once "
            "the runner accepted the job (what a Flex Template launcher does).",
        )
        parser.add_argument(
            "--progress_seconds",
            type=float,
            default=5.0,
            help="How often a waiting launcher logs progress (shards done, records, input "
            "MB/s, worker processes); default 5.",
        )
        parser.add_argument(
            "--overwrite",
            nargs="?",
            const="true",
            default="false",
            help="Convert again even when OUTPUT holds this very conversion, and write into an "
            "OUTPUT that holds other files (only tfrecord-etl's own files are replaced).",
        )
        parser.add_argument(
            "--sample_bytes",
            default=DEFAULT_SAMPLE_BYTES,
            help="Bytes read from the head of each sampled file to infer types and sizes.",
        )


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """Validated conversion settings; inner code trusts them."""

    inputs: tuple[str, ...]
    output: str
    format: str = "csv"
    delimiter: str | None = None  # None: detected from the sampled head
    column_names: tuple[str, ...] = ()
    skip_header_lines: int = 0
    encoding: str = "utf-8"
    schema: str | None = None
    labels: str | None = None
    splits: tuple[tuple[str, int], ...] = ()
    split_key: str | None = None
    columns: tuple[str, ...] = ()
    renames: tuple[tuple[str, str], ...] = ()
    label: str | None = None
    target_shard_bytes: int = parse_size(DEFAULT_TARGET_SHARD_BYTES)
    num_shards: int | None = None
    compression: str = "none"
    compression_level: int = DEFAULT_GZIP_LEVEL
    shard_prefix: str = DEFAULT_SHARD_PREFIX
    sample_bytes: int = parse_size(DEFAULT_SAMPLE_BYTES)
    overwrite: bool = False
    max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION
    max_record_bytes: int = parse_size(DEFAULT_MAX_RECORD_BYTES)
    run_date: str = ""
    dry_run: bool = False
    wait: bool = True
    progress_seconds: float = 5.0
    plan_only: bool = False  # `inspect --input`: no output folder to check or write

    def __post_init__(self) -> None:
        if not self.inputs:
            raise UsageError("--input is required: a file or glob pattern, e.g. 'data/*.csv'")
        if not self.output and not self.plan_only:
            raise UsageError("--output is required: the directory for shards and manifest.json")
        if set(self.output) & set("*?[]"):
            # Beam's file systems read such a path as a pattern when listing and deleting.
            raise UsageError(f"--output {self.output} holds a glob character (* ? [ ]); rename it")
        if self.format not in FORMAT_NAMES:
            raise UsageError(
                f"--format must be one of {', '.join(FORMAT_NAMES)}, got {self.format!r}"
            )
        csv_flags = self.delimiter or self.column_names or self.skip_header_lines
        if csv_flags and self.format != "csv":
            raise UsageError(
                "--delimiter, --column_names and --skip_header_lines are for --format csv only"
            )
        if self.encoding != "utf-8" and self.format not in ("csv", "text"):
            raise UsageError(
                f"--encoding is for --format csv and text; {self.format} input is UTF-8 by "
                "definition"
            )
        if self.skip_header_lines < 0:
            raise UsageError(f"--skip_header_lines must be 0 or more, got {self.skip_header_lines}")
        if self.labels and self.format != "images":
            raise UsageError("--labels (--image_labels) is for --format images only")
        if self.split_key and not self.splits:
            raise UsageError("--split_key needs --splits, e.g. --splits train=80,eval=20")
        if self.compression not in COMPRESSIONS:
            raise UsageError(
                f"--compression must be one of {', '.join(COMPRESSIONS)}, got {self.compression!r}"
            )
        if self.compression_level not in GZIP_LEVELS:
            raise UsageError(
                f"--compression_level must be 1 (fastest) to 9 (smallest), got "
                f"{self.compression_level}"
            )
        if self.target_shard_bytes < MIN_TARGET_SHARD_BYTES:
            raise UsageError(
                f"--target_shard_bytes must be at least {MIN_TARGET_SHARD_BYTES} bytes, "
                f"got {self.target_shard_bytes}"
            )
        if self.num_shards is not None and self.num_shards < 1:
            raise UsageError(f"--num_shards must be at least 1, got {self.num_shards}")
        if not 0.0 <= self.max_bad_fraction <= 1.0:
            raise UsageError(
                f"--max_bad_fraction must be between 0 and 1, got {self.max_bad_fraction}"
            )
        if self.max_record_bytes < 1:
            raise UsageError(f"--max_record_bytes must be at least 1, got {self.max_record_bytes}")
        if self.sample_bytes < MIN_SAMPLE_BYTES:
            raise UsageError(
                f"--sample_bytes must be at least {MIN_SAMPLE_BYTES}, got {self.sample_bytes}"
            )
        if not is_valid_name(self.shard_prefix):
            raise UsageError(f"--shard_prefix may hold only {NAME_RULE}, got {self.shard_prefix!r}")

    @classmethod
    def from_options(cls, options: PipelineOptions, plan_only: bool = False) -> ConvertConfig:
        """Validates the parsed flags; raises `UsageError` naming the bad flag.

        `plan_only` (for `inspect --input`) takes the flags without an `--output`.
        """
        view = options.view_as(ConvertOptions)
        run_date = view.run_date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        try:
            # fromisoformat alone would also take 20261201.
            if len(run_date) != 10 or run_date[4] != "-":
                raise ValueError(run_date)
            datetime.date.fromisoformat(run_date)
        except ValueError as e:
            raise UsageError(f"--run_date must be YYYY-MM-DD, got {run_date!r}") from e
        try:
            target = parse_size(view.target_shard_bytes)
            sample = parse_size(view.sample_bytes)
            max_record = parse_size(view.max_record_bytes)
        except ValueError as e:
            raise UsageError(str(e)) from e
        inputs = tuple(fill_date(pattern, run_date) for pattern in view.input or ())
        format_name = view.format or guess_format(inputs)
        try:
            delimiter = parse_delimiter(view.delimiter) if view.delimiter else None
        except ValueError as e:
            raise UsageError(str(e)) from None
        column_names = (
            tuple(n.strip() for n in view.column_names.split(",")) if (view.column_names) else ()
        )
        try:
            encoding = parse_encoding(view.encoding)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if format_name is None:
            raise UsageError(
                f"cannot tell the input format from {list(inputs)}; pass --format "
                f"({', '.join(FORMAT_NAMES)})"
            )
        return cls(
            inputs=inputs,
            output=fill_date(view.output or "", run_date).rstrip("/"),
            format=format_name,
            delimiter=delimiter,
            column_names=column_names,
            skip_header_lines=view.skip_header_lines,
            encoding=encoding,
            schema=view.schema,
            labels=view.image_labels,
            splits=parse_splits(view.splits) if view.splits else (),
            split_key=view.split_key,
            columns=parse_columns(view.columns) if view.columns else (),
            renames=parse_renames(view.rename) if view.rename else (),
            label=view.label_column,
            target_shard_bytes=target,
            num_shards=view.num_shards,
            compression=view.compression,
            compression_level=view.compression_level,
            shard_prefix=view.shard_prefix,
            sample_bytes=sample,
            overwrite=_flag(view.overwrite, "--overwrite"),
            max_bad_fraction=view.max_bad_fraction,
            max_record_bytes=max_record,
            run_date=run_date,
            wait=_flag(view.wait, "--wait"),
            progress_seconds=_positive_seconds(view.progress_seconds),
            # Beam already defines --dry_run (TestOptions, with a value); for us: plan only.
            dry_run=str(options.view_as(TestOptions).dry_run).lower() in ("true", "1", "yes"),
            plan_only=plan_only,
        )

    def projection(self) -> Projection:
        """The columns the output keeps, and their names (`--columns`, `--rename`)."""
        return Projection(self.columns, self.renames)

    def dialect(self) -> Dialect:
        """The CSV dialect the flags give (a None delimiter is detected at planning)."""
        return Dialect(self.delimiter, self.column_names, self.skip_header_lines, self.encoding)

    def to_json(self) -> dict[str, Any]:
        """The options that define the conversion, as recorded in the manifest."""
        options = dataclasses.asdict(self) | {
            "inputs": list(self.inputs),
            "column_names": list(self.column_names),
            "splits": [list(split) for split in self.splits],
            "columns": list(self.columns),
            "renames": [list(pair) for pair in self.renames],
        }
        for how_to_run in (
            "overwrite",
            "dry_run",
            "run_date",
            "wait",
            "progress_seconds",
            "plan_only",
        ):
            del options[how_to_run]
        return options


def _positive_seconds(value: float) -> float:
    if not value > 0:
        raise UsageError(f"--progress_seconds must be a positive number of seconds, not {value}")
    return value


def fill_date(template: str, run_date: str) -> str:
    """Replaces {date} (YYYY-MM-DD) and its parts {yyyy}, {mm}, {dd} in a path or pattern.

    A daily job reads `gs://raw/{date}/*.csv` or `raw/year={yyyy}/month={mm}/day={dd}/*`.
    """
    yyyy, mm, dd = run_date.split("-")
    for name, value in (("date", run_date), ("yyyy", yyyy), ("mm", mm), ("dd", dd)):
        template = template.replace("{" + name + "}", value)
    return template


def parse_splits(text: str) -> tuple[tuple[str, int], ...]:
    """`train=80,eval=20` -> (("train", 80), ("eval", 20)); raises UsageError."""
    splits = []
    for part in text.split(","):
        name, _, weight = part.strip().partition("=")
        if not is_valid_name(name) or not weight.isdigit():
            raise UsageError(
                f"--splits must look like train=80,eval=20 (names of {NAME_RULE}, positive "
                f"integer weights), got {text!r}"
            )
        splits.append((name, int(weight)))
    names = [n for n, _ in splits]
    if len(set(names)) != len(names) or any(w < 1 for _, w in splits):
        raise UsageError(f"--splits needs distinct names and weights of at least 1, got {text!r}")
    return tuple(splits)


def _flag(value: str | bool, name: str) -> bool:
    text = str(value).lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise UsageError(f"{name} must be true or false, got {value!r}")
    return text in ("true", "1", "yes")
