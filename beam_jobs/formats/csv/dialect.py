"""The CSV dialect detected: the field delimiter of a file's head, whether its first line is a
header, the lines to skip (the flags themselves: `formats.lines.layout.Dialect`).

Detection reads the first records of the first sampled file with each of comma, tab, `;` and
`|` (quotes respected, as Python's csv module reads them) and keeps the delimiters that split
every record into the same number of fields, more than one. Of those, the one that gives the
most fields wins (a tab-separated file whose names hold commas, `Name (last, first)`, splits
into more fields by tab); on a tie, the file's name decides (`.tsv`: tab), then comma. When no
delimiter splits the records evenly, the same choice among those that split the header into
more than one field, every record after it into at most one more than the header and most of
them into more than one (rows whose trailing empty fields were left out, row names without a
name); failing that, a `.tsv` file is tab-separated and any other comma-separated.
`inspect --input` shows what was chosen.
"""

from __future__ import annotations

import csv
import io
import itertools
import posixpath
import re
from collections.abc import Iterator

from beam_jobs.formats.compressed import CONTAINER_SUFFIXES
from beam_jobs.formats.lines.layout import DELIMITERS

__all__ = ["detect_delimiter", "looks_like_data", "skip_lines"]

_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


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
        fields = _ragged_fields(text)
    if not fields:
        return named
    most = max(fields.values())
    best = [d for d in DELIMITERS.values() if fields.get(d) == most]
    for choice in (named, ","):  # a tie: the file's name decides, then comma
        if choice in best:
            return choice
    return best[0] if len(best) == 1 else named


def _ragged_fields(text: str) -> dict[str, int]:
    """{delimiter: the header's fields} of the delimiters that split the header into more
    than one field, every record after it into at most one more than the header, and most
    of them into more than one (a writer that leaves out trailing empty fields: `a;b;c` over
    `1;2` and `3`; row names without a name: `header_fit`)."""
    fields: dict[str, int] = {}
    for delimiter in DELIMITERS.values():
        counts = [len(r) for r in itertools.islice(_records(text, delimiter), _DETECT_RECORDS)]
        rows = counts[1:]
        split = sum(c > 1 for c in rows)
        if (
            rows
            and counts[0] > 1
            and all(c <= counts[0] + 1 for c in rows)
            and 2 * split > len(rows)
        ):
            fields[delimiter] = counts[0]
    return fields


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
