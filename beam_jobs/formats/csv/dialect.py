"""The CSV dialect of a conversion: the field delimiter, whether files have a header line, and
how many lines come before it. Given by flags, or the delimiter detected from a file's head.

Detection reads the first records of the first sampled file with each of comma, tab, `;` and
`|` (quotes respected, as Python's csv module reads them) and keeps the delimiters that split
every record into the same number of fields, more than one. Of those, the one that gives the
most fields wins (a tab-separated file whose names hold commas, `Name (last, first)`, splits
into more fields by tab); on a tie, the file's name decides (`.tsv`: tab), then comma. When no
delimiter splits the records evenly, a `.tsv` file is tab-separated and any other comma-
separated. `inspect --input` shows what was chosen.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import io
import itertools
import posixpath
import re
from collections.abc import Iterator

from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError
from beam_jobs.formats.compressed import CONTAINER_SUFFIXES
from beam_jobs.formats.csv.markers import accept_markers, parse_markers

__all__ = [
    "DELIMITERS",
    "Dialect",
    "detect_delimiter",
    "looks_like_data",
    "parse_delimiter",
    "parse_encoding",
    "skip_lines",
]

# The delimiters detection tries, in the order ties go, by the name `--delimiter` takes.
DELIMITERS = {"comma": ",", "tab": "\t", "semicolon": ";", "pipe": "|"}
_SHOWN = {character: name for name, character in DELIMITERS.items()}
_NAMED = ", ".join([*DELIMITERS, "\\t"])  # what --delimiter takes by name
_TRIED = f"{', '.join(list(DELIMITERS)[:-1])} and {list(DELIMITERS)[-1]}"  # what detection tries
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


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


_DETECT_RECORDS = 20  # records of the head that detection reads


def detect_delimiter(path: str, head: bytes) -> str:
    """The delimiter a file's name and first records show, by the rule in this module's doc.

    Args:
      path: the file (its name may say `.tsv`).
      head: the file's first bytes from its header line (or its data, without one).
    """
    name = posixpath.basename(path).lower()
    for suffix in CONTAINER_SUFFIXES:
        name = name.removesuffix(suffix)
    named = "\t" if name.endswith(".tsv") else ","
    complete = head[: head.rfind(b"\n") + 1] or head  # no record cut short by the head's end
    text = complete.decode("latin-1")  # every delimiter is ASCII; any bytes decode
    fields: dict[str, int] = {}
    for delimiter in DELIMITERS.values():
        counts = {len(r) for r in itertools.islice(_records(text, delimiter), _DETECT_RECORDS)}
        if len(counts) == 1 and (count := counts.pop()) > 1:
            fields[delimiter] = count
    if not fields:
        return named
    most = max(fields.values())
    best = [d for d in DELIMITERS.values() if fields.get(d) == most]
    for choice in (named, ","):  # a tie: the file's name decides, then comma
        if choice in best:
            return choice
    return best[0] if len(best) == 1 else named


def _records(text: str, delimiter: str) -> Iterator[list[str]]:
    try:
        yield from (r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r)
    except csv.Error:
        return  # not readable with this delimiter (a stray quote): no say


def skip_lines(data: bytes, count: int) -> int | None:
    """The offset just past the first `count` lines of `data` (None: it has fewer)."""
    offset = 0
    for _ in range(count):
        newline = data.find(b"\n", offset)
        if newline < 0:
            return None
        offset = newline + 1
    return offset


def looks_like_data(names: list[str]) -> bool:
    """True when the would-be column names read as a record: every one a number, or any one a
    number with a fraction, exponent or sign (`5.1`, `-3`), which no one names a column (whole
    numbers alone may be years: `country,2019,2020`)."""
    numbers = [n for n in names if _NUMBER.fullmatch(n)]
    if names and len(numbers) == len(names):
        return True
    return any(re.search(r"[.eE+-]", n) for n in numbers)
