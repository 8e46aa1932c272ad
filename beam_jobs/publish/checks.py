"""What publishing checks before it names anything: each input file's records read end to end
once, every row read written or set aside, and the bad rows within `--max_bad_fraction`."""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.bad_rows import DEAD_LETTER_DIR
from beam_jobs.core.errors import DataError, TooManyBadRecords
from beam_jobs.core.inputs import Covered
from beam_jobs.core.tasks import WrittenShard

__all__ = ["check_bad_fraction", "check_conservation", "check_coverage", "rows_read"]


def check_coverage(written: Sequence[WrittenShard]) -> None:
    """Each file whose pieces report what they covered must be covered end to end, once."""
    by_file: dict[str, list[Covered]] = {}
    for w in written:
        for c in w.covered:
            by_file.setdefault(c.path, []).append(c)
    for path, parts in sorted(by_file.items()):
        reached = 0
        for part in sorted(parts, key=lambda c: c.start):
            if part.start != reached:
                what = "read by no writer" if part.start > reached else "read twice"
                low, high = sorted((reached, part.start))
                raise DataError(
                    f"{path}: bytes {low}-{high} were {what} (the file's records do not chain "
                    "across a cut: it is corrupt there, or a resync went wrong); nothing was "
                    "published"
                )
            reached = part.end
        if reached != parts[0].file_size:
            raise DataError(
                f"{path}: its records end at byte {reached} but the file has "
                f"{parts[0].file_size}; nothing was published"
            )


def rows_read(written: Sequence[WrittenShard]) -> int:
    """Rows read, as the writers counted them where they read (each row once)."""
    return sum(w.counts.records_read or 0 for w in written)


def check_conservation(written: Sequence[WrittenShard]) -> int:
    """Every row read is written or set aside, counted where it was read and where it was
    written: a row lost between stages (a runner that drops data) stops the publish."""
    read = rows_read(written)
    records = sum(w.records for w in written)
    bad = sum(w.bad_records for w in written)
    if read != records + bad:
        raise DataError(
            f"rows in != rows out: {read:,} rows were read, but {records:,} records were "
            f"written and {bad:,} set aside as bad; {read - records - bad:,} rows are missing "
            "between reading and publishing; nothing was published"
        )
    return read


def check_bad_fraction(
    written: Sequence[WrittenShard], output: str, limit: float, dead_letters: list[str]
) -> None:
    """Raises TooManyBadRecords when more rows were bad than `--max_bad_fraction` allows
    (`dead_letters`: where their dead letters are published)."""
    bad = sum(w.bad_records for w in written)
    total = bad + sum(w.records for w in written)
    if total and bad / total > limit:
        raise TooManyBadRecords(
            f"{bad:,} of {total:,} records ({bad / total:.3%}) could not be converted, more than "
            f"--max_bad_fraction {limit} allows; they are listed with their reasons in "
            f"{FileSystems.join(output, DEAD_LETTER_DIR)}/; no manifest was published (an "
            "earlier conversion in that folder is left as it was)",
            output=output,
            dead_letters=dead_letters,
        )
