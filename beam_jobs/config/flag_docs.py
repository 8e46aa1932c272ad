"""docs/flags.md, written from the flag table (`make docs`; a test holds the page to it).

python -m beam_jobs.config.flag_docs > docs/flags.md
"""

from __future__ import annotations

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core import flags

__all__ = ["flags_page"]

_HEAD = """\
# `convert`'s flags

Written from the flag table (`beam_jobs/config/convert.py` and the option groups it holds) by
`make docs`; `tfrecord-etl convert --help` prints the same texts. Every flag is also a keyword
of `beam_jobs.convert(...)`, without the `--` (aliases too). Flags marked *reading* are taken by
`inspect --input` as well; *run* flags say how to run, not what to convert (a rerun that
changes only them is the same conversion). A flag that may stand alone (`--overwrite`,
`--dry_run`) takes a value only as `--flag=value` or a true/false word after it; an empty
value (`--splits=`) of a flag without a default means not given. Any Beam pipeline flag is
accepted besides these.

| flag | also | what it does |
|---|---|---|
"""


def _row(flag: flags.Flag) -> str:
    name = f"`--{flag.name}{' ' + flag.metavar if flag.metavar else ''}`"
    also = ", ".join(f"`--{a}`" for a in flag.aliases)
    marks = [m for m, on in (("reading", flag.reading), ("run", not flag.recorded)) if on]
    text = flag.help.replace("|", "\\|")
    return f"| {name} | {also} | {text}{' (' + ', '.join(marks) + ')' if marks else ''} |\n"


def flags_page() -> str:
    """The whole page."""
    return _HEAD + "".join(_row(flag) for flag in flags.flags(ConvertConfig))


if __name__ == "__main__":
    print(flags_page(), end="")
