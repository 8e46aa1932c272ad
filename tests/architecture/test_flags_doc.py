"""docs/flags.md is the flag table's own text: it cannot drift from the code."""

from __future__ import annotations

import pathlib

from beam_jobs.config.flag_docs import flags_page

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_flags_page_is_written_from_the_table():
    page = (ROOT / "docs" / "flags.md").read_text()
    assert page == flags_page(), "docs/flags.md is stale: run `make docs`"


def test_every_flag_has_a_row():
    page = flags_page()
    for name in ("--input PATTERN", "--target_shard_bytes SIZE", "--label_column COLUMN"):
        assert f"| `{name}` |" in page
    assert "| `--label_column COLUMN` | `--label` |" in page
