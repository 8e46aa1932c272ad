"""Memory stays flat: a decompression bomb is planned and converted in bounded memory."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
GiB = 1 << 30


def _peak_rss_of(argv: list[str]) -> tuple[subprocess.CompletedProcess, int]:
    """Runs the CLI in a child process; returns its result and its peak RSS in bytes."""
    code = (
        "import resource, subprocess, sys;"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024);"
        "sys.exit(r.returncode)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "beam_jobs", *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return result, int(result.stdout.splitlines()[-1])


def test_planning_a_gzip_bomb_stays_under_1_gib(tmp_path):
    bomb = tmp_path / "bomb.csv.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b"a,b\n")
        chunk = b"1,2\n" * (1 << 18)
        for _ in range(GiB // len(chunk)):
            f.write(chunk)
    assert bomb.stat().st_size < 1_100_000  # about 1 MB on disk, 1 GiB of content
    for argv in (
        ["convert", "--input", str(bomb), "--output", str(tmp_path / "o"), "--dry_run"],
        ["inspect", "--input", str(bomb)],
    ):
        result, peak = _peak_rss_of(argv)
        assert result.returncode == 0, result.stderr[-2000:]
        assert peak < GiB, (argv[0], peak)


def test_converting_a_gzip_bomb_stays_under_1_gib(tmp_path):
    bomb = tmp_path / "bomb.txt.gz"
    line = b"x" * 999 + b"\n"
    chunks = (256 << 20) // (1024 * len(line))  # about 256 MiB of content
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        for _ in range(chunks):
            f.write(line * 1024)
    out = tmp_path / "out"
    argv = ["convert", "--input", str(bomb), "--output", str(out), "--target_shard_bytes=64MiB"]
    result, peak = _peak_rss_of(argv)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.splitlines()[-2])
    assert summary["records_written"] == chunks * 1024
    assert peak < GiB, peak


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".csv"])
def test_one_endless_line_in_a_gzip_stops_in_bounded_memory(tmp_path, suffix):
    # One 1 GiB line in a 1 MB .gz, with the default --max_record_bytes (64 MiB).
    bomb = tmp_path / f"bomb{suffix}.gz"
    with gzip.open(bomb, "wb", compresslevel=6) as f:
        f.write(b"a,b\n1,2\n" if suffix == ".csv" else b'{"a": 1}\n')
        # NUL bytes, but letters for CSV and JSON: a head with NUL bytes stops their plan
        # (UTF-16?).
        filler = bytes(1 << 20) if suffix == ".txt" else b"x" * (1 << 20)
        for _ in range(1024):
            f.write(filler)
    result, peak = _peak_rss_of(["convert", "--input", str(bomb), "--output", str(tmp_path / "o")])
    assert result.returncode == 1, result.stderr[-2000:]
    assert "is longer than 134,217,728 bytes (twice --max_record_bytes)" in result.stderr
    assert peak < GiB, peak
