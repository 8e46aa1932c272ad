"""`tfrecord-etl report`: the page's content, checked against the dataset and its dead letter
read independently, and the page rendered in headless Chromium (no script errors, charts of
non-zero size, the text a person reads)."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
import sys

import pytest
from support.datasets import ROOT

from beam_jobs.inspection.html_report import MAX_REASONS, dead_letter_reasons, load_report, render

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _convert(src, out, *flags: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "convert", "--input", str(src), "--output", str(out),
         "--direct_running_mode=in_memory", "--direct_num_workers=1", *flags],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A CSV with bad rows (too many columns, a mistyped value), hostile text, and two splits,
    converted."""
    folder = tmp_path_factory.mktemp("report")
    src = folder / "in.csv"
    with open(src, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "score", "city"])
        for i in range(400):
            city = ["Oslo", "<script>alert(1)</script>", "Zürich", ""][i % 4]
            writer.writerow([i, "" if i % 10 == 0 else i / 4, city])
        f.write("400,x,Oslo\n401,2.0,Oslo,extra\n402,1,2,3,4\n")  # three bad rows
    out = folder / "out"
    _convert(src, out, "--splits=train=3,eval=1", "--num_shards=2", "--max_bad_fraction=0.1")
    return out


def test_dead_letter_reasons_count_every_row(dataset):
    data = load_report(str(dataset))
    rows = []
    for name in data.manifest.dead_letter:
        rows += [json.loads(line) for line in (dataset / name).read_text().splitlines()]
    expected: dict[str, int] = {}
    for row in rows:
        expected[row["reason"]] = expected.get(row["reason"], 0) + 1
    assert {r.reason: r.count for r in data.reasons} == expected
    assert sum(expected.values()) == data.manifest.counts.bad_records == 3
    assert all(r.examples and r.examples[0].startswith(str(rows[0]["file"])) for r in data.reasons)


def test_reasons_past_the_limit_are_counted_together(tmp_path):
    path = tmp_path / "dl.jsonl"
    lines = [{"file": "a.csv", "line": i, "reason": f"reason {i % (MAX_REASONS + 5)}"}
             for i in range(200)]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    reasons, other = dead_letter_reasons([str(path)])
    assert len(reasons) == MAX_REASONS
    assert sum(r.count for r in reasons) + other == 200
    assert all(len(r.examples) <= 3 for r in reasons)


def test_the_page_escapes_what_the_data_holds(dataset):
    page = render(load_report(str(dataset)))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # ours only
    assert "http://" not in page and "https://" not in page  # nothing fetched at view time


def _rendered(page) -> tuple[str, str]:
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--virtual-time-budget=3000", "--window-size=1200,2000", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, result.stderr


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (make test installs Debian's chromium when it can: see Makefile)",
)
def test_the_page_renders_in_chromium(dataset, tmp_path):
    page = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "report", str(dataset), "-o", str(page)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    data = load_report(str(dataset))
    manifest = data.manifest
    dom, log = _rendered(page)
    assert "Uncaught" not in log and ":CONSOLE" not in log.replace("INFO:CONSOLE", "")
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-errors="0"' in body
    sizes = re.search(r'data-chart-sizes="([^"]*)"', body).group(1).split()
    # The shard chart, then per split a histogram for id and score and top values for city.
    assert len(sizes) == 1 + 2 * 3
    assert all(int(w) > 0 and int(h) > 0 for w, h in (s.split("x") for s in sizes))
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    for feature in ("id", "score", "city"):
        assert f'data-feature="{feature}"' in dom
    assert f"{manifest.total_records:,}" in text
    for split, summary in manifest.split_summary().items():
        assert f"{split}: {summary['records']:,} records" in text
    assert len(data.reasons) >= 2  # a mistyped value and too many columns
    for reason in data.reasons:
        assert reason.reason in text
        assert reason.examples[0].split("  ")[0] in text  # file:line of its first row
