"""How lines of delimited text are laid out (`Dialect`, a group of flags): the field
delimiter, the header line and the lines before it, the text encoding (every text format's),
and the cells that stand for missing values. Detection from a file's head is CSV's
(`formats.csv.dialect`); what markers do in a column is CSV's too (`formats.csv.markers`).
"""

from __future__ import annotations

import codecs
import dataclasses

from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError

__all__ = [
    "DELIMITERS",
    "Dialect",
    "accept_markers",
    "parse_delimiter",
    "parse_encoding",
    "parse_markers",
]

# The delimiters detection tries, in the order ties go, by the name `--delimiter` takes.
DELIMITERS = {"comma": ",", "tab": "\t", "semicolon": ";", "pipe": "|"}
_SHOWN = {character: name for name, character in DELIMITERS.items()}
_NAMED = ", ".join([*DELIMITERS, "\\t"])  # what --delimiter takes by name
_TRIED = f"{', '.join(list(DELIMITERS)[:-1])} and {list(DELIMITERS)[-1]}"  # what detection tries


def parse_delimiter(text: str) -> str:
    """`--delimiter` as one character: any character but a quote or a line end, or a name
    (`tab`, `\\t`, `comma`, `semicolon`, `pipe`). Raises UsageError naming the value."""
    value = {**DELIMITERS, "\\t": "\t"}.get(text.lower(), text)
    if len(value) != 1 or value in '"\r\n':
        raise UsageError(
            "--delimiter must be one character other than a quote or a line end (or "
            f"{_NAMED}), got {text!r}"
        )
    return value


# Bytes the readers find records by, before any decoding: they must be these same bytes.
_STRUCTURE = "\n\r\t ,;|\"'{}[]:0123456789"


def parse_encoding(name: str) -> str:
    """`--encoding`: a codec Python knows whose newlines, quotes and delimiters are the ASCII
    bytes (latin-1, cp1252, ...), normalized; UsageError for others (UTF-16 and UTF-32 files
    must be converted to UTF-8 first)."""
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise UsageError(f"--encoding {name!r} is not an encoding Python knows") from None
    try:
        same = _STRUCTURE.encode(info.name) == _STRUCTURE.encode("ascii")
    except UnicodeEncodeError:
        same = False
    if not same:
        raise UsageError(
            f"--encoding {name!r} does not write newlines, quotes and delimiters as ASCII does; "
            "convert such files to UTF-8 first (e.g. iconv -f UTF-16 -t UTF-8)"
        )
    return "utf-8" if info.name == "utf-8" else info.name


def _skip_header_lines(text: str) -> int:
    count = flags.parse_int(text)
    return _non_negative(count)


def _non_negative(count: int) -> int:
    if flags.whole_number(count) < 0:
        raise UsageError(f"--skip_header_lines must be 0 or more, got {count}")
    return count


def _checked(markers: list[str]) -> tuple[str, ...]:
    for marker in markers:
        if marker != marker.strip() or "\n" in marker or "\r" in marker:
            raise UsageError(
                f"--null_values: {marker!r} has spaces around it or a line end; a marker is "
                "matched against the whole cell"
            )
    return tuple(dict.fromkeys(m for m in markers if m))  # "" is always missing


def parse_markers(text: str) -> tuple[str, ...]:
    """`--null_values NA,N/A,NULL`: the markers, comma-separated; `''` for none but the empty
    cell (no inference of markers either)."""
    return _checked([m.strip() for m in text.split(",")])


def accept_markers(value: object) -> tuple[str, ...]:
    """`null_values=[...]` in Python: a list of texts."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return _checked(list(value))
    raise TypeError(f"takes a list of texts, got {type(value).__name__} {value!r}")


@dataclasses.dataclass(frozen=True)
class Dialect:
    """How a conversion's CSV files are laid out (`encoding` is also the text format's).

    Attributes:
      delimiter: the field delimiter; None until detected from the first sampled file.
      column_names: the columns, when the files have no header line (`--column_names`).
      skip_header_lines: lines before the header (or before the data, without one) to ignore.
      encoding: the files' text encoding (`--encoding`); pyarrow decodes it to UTF-8.
      null_values: the cells read as missing besides empty ones (`--null_values`); None: in
        number columns, pandas' default markers (`beam_jobs.formats.csv.markers`).
      infer_null_values: without `null_values`, whether one-token cells (`.`, `-`, `nil`)
        are missing values in number columns (`markers.TOKEN`).
      units_row: whether a units line under the header is taken out (`csv.units_row`).
    """

    delimiter: str | None = flags.option(
        parse=parse_delimiter,
        reading=True,
        metavar="C",
        help=f"CSV field delimiter: one character, or {_NAMED} (default: detected from the "
        f"first records: the one of {_TRIED} that splits every record into the same number of "
        "fields, the most; a .tsv name, then comma, breaks ties).",
    )
    column_names: tuple[str, ...] = flags.option(
        (),
        parse=flags.parse_names,
        accept=flags.accept_names,
        reading=True,
        metavar="A,B,C",
        help="CSV files have no header line: their columns, e.g. id,name,score.",
    )
    skip_header_lines: int = flags.option(
        0,
        parse=_skip_header_lines,
        accept=_non_negative,
        reading=True,
        metavar="N",
        help="CSV: lines at the start of each file to skip before the header (or the data).",
    )
    encoding: str = flags.option(
        "utf-8",
        parse=parse_encoding,
        reading=True,
        metavar="NAME",
        help="CSV and text: the files' text encoding, e.g. latin-1 or cp1252 (default "
        "utf-8); read as UTF-8 from then on.",
    )
    null_values: tuple[str, ...] | None = flags.option(
        parse=parse_markers,
        accept=accept_markers,
        reading=True,
        takes_empty=True,
        metavar="A,B",
        help="CSV: cells read as missing in every column besides empty ones, e.g. NA,NULL "
        "('' for none). Default: in columns of numbers, pandas' markers (NA, N/A, NULL, null, "
        "None, #N/A, <NA>, ...), recorded per feature; text columns keep them as text.",
    )
    infer_null_values: bool = flags.switch(
        True,
        reading=True,
        metavar="true|false",
        help="CSV, without --null_values: in a column of numbers, a one-token cell that is "
        "no number (., -, --, ?, nil, n.a.) is a missing value, counted and recorded per "
        "feature (default true); false: such cells make a column text, or their rows bad rows.",
    )
    units_row: bool = flags.switch(
        True,
        reading=True,
        metavar="true|false",
        help="CSV: a line under the header that holds units (mm, kg, °C) in columns of numbers "
        "is taken out of the data of every file and kept as the features' units (default "
        "true); false: read as a row of data.",
    )

    @property
    def has_header(self) -> bool:
        return not self.column_names

    def describe(self, detected: bool) -> str:
        delimiter = _SHOWN.get(self.delimiter or ",", repr(self.delimiter))
        parts = [f"delimiter {delimiter}{' (detected)' if detected else ''}"]
        parts.append("header line" if self.has_header else "no header line (--column_names)")
        if self.skip_header_lines:
            parts.append(f"{self.skip_header_lines} lines skipped first")
        if self.encoding != "utf-8":
            parts.append(f"encoding {self.encoding}")
        if self.null_values is not None:
            shown = ", ".join(self.null_values) or "none but empty cells"
            parts.append(f"missing-value markers {shown} (--null_values)")
        return ", ".join(parts)
