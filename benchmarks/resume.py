"""What resuming saves: a conversion killed (SIGKILL of its process group) at 10%, 50% and 90%
of its time, then run again with the same command; and a run that failed on its bad-row budget,
run again with a larger one. Each rerun is timed against the uninterrupted run and checked to
publish the same fingerprint.

Bounds (issue 48): a run killed at a share `done` of its time finishes in at most
(1 - done) x full + 0.1 x full + start-up (start-up: a conversion of 16 rows, measured here);
a rerun with a larger `--max_bad_fraction` takes at most 15% of the run that failed on it. A
rerun's fixed costs (planning a large input, checking the kept files, the tasks a kill cut
short) are a larger share of a small run: the default input is about 1 GB.

    python benchmarks/resume.py [--rows 12000000] [--workdir bench_data/resume]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from data import write_csv  # noqa: E402

FLAGS = ["--target_shard_bytes", "32MiB"]


def _argv(source: pathlib.Path, out: pathlib.Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "beam_jobs", "convert", "--input", str(source),
            "--output", str(out), *FLAGS, *flags]  # fmt: skip


def _run(argv: list[str]) -> tuple[float, dict]:
    """Seconds, and the JSON status line."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def _killed_at(argv: list[str], after: float) -> dict:
    """Starts a run and SIGKILLs its process group after `after` seconds; what it kept."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=env, cwd=ROOT)  # fmt: skip
    time.sleep(after)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    out = pathlib.Path(argv[argv.index("--output") + 1])
    kept = [p for f in out.glob(".tfrecord-etl-tmp-*") for p in f.rglob("*") if p.is_file()]
    records = [p for p in kept if p.name.endswith(".commit")]
    return {"files": len(kept), "bytes": sum(p.stat().st_size for p in kept),
            "tasks": len(records)}  # fmt: skip


def _dirty(path: pathlib.Path, rows: int) -> None:
    """Narrow rows, 3% of them with a word where a count is (dead letters past the sample)."""
    rng = np.random.default_rng(3)
    values = rng.integers(0, 1000, rows).astype(str).astype(object)
    bad = rng.random(rows) < 0.03
    bad[:20_000] = False
    values[bad] = "unknown"
    table = pa.table({"id": np.arange(rows), "v": values.astype(str), "w": rng.normal(size=rows)})
    pcsv.write_csv(table, str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=12_000_000)  # about 1 GB of CSV
    parser.add_argument("--workdir", type=pathlib.Path, default=ROOT / "bench_data" / "resume")
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"narrow-{args.rows}.csv"
    if not source.exists():
        write_csv(source, args.rows)
    tiny = work / "tiny.csv"
    if not tiny.exists():
        write_csv(tiny, 16)
    outs = work / "out"
    shutil.rmtree(outs, ignore_errors=True)
    startup, _ = _run(_argv(tiny, outs / "tiny"))
    full, whole = _run(_argv(source, outs / "full"))
    print(f"input: {source.name}, {source.stat().st_size / 1e6:,.0f} MB; flags: {' '.join(FLAGS)}")
    print(f"uninterrupted: {full:.1f} s ({whole['shards']} shards); start-up (16 rows): "
          f"{startup:.1f} s\n")  # fmt: skip
    print(
        "| killed at | kept tasks | kept | rerun, s | bound, s | rerun / full | same fingerprint |"
    )
    print("|---|---|---|---|---|---|---|")
    for done in (0.1, 0.5, 0.9):
        out = outs / f"killed-{done}"
        kept = _killed_at(_argv(source, out), done * full)
        rerun, result = _run(_argv(source, out))
        bound = (1 - done) * full + 0.1 * full + startup
        same = "yes" if result.get("fingerprint") == whole["fingerprint"] else "NO"
        print(f"| {done:.0%} ({done * full:.1f} s) | {kept['tasks']} | "
              f"{kept['bytes'] / 2**20:,.0f} MiB | {rerun:.1f} | {bound:.1f} | "
              f"{rerun / full:.2f} | {same} |", flush=True)  # fmt: skip
        shutil.rmtree(out)
    dirty = work / f"dirty-{args.rows}.csv"
    if not dirty.exists():
        _dirty(dirty, args.rows)
    schema = work / "dirty_schema.json"  # `v` stays int64 whatever the sample: 3% dead letters
    schema.write_text(json.dumps({"features": [{"name": "v", "dtype": "int64"}]}))
    typed = ["--schema", str(schema)]
    out = outs / "budget"
    failed, first = _run(_argv(dirty, out, *typed, "--max_bad_fraction", "0.001"))
    again, second = _run(_argv(dirty, out, *typed, "--max_bad_fraction", "0.05"))
    direct, third = _run(_argv(dirty, outs / "budget-direct", *typed, "--max_bad_fraction", "0.05"))
    same = "yes" if second.get("fingerprint") == third.get("fingerprint") else "NO"
    print(f"\nbad-row budget: the run over it {failed:.1f} s (exit {first['exit_code']}), the "
          f"rerun with a larger one {again:.1f} s = {again / failed:.2f} of it (bound 0.15; "
          f"{second.get('tasks_reused')} tasks reused); a direct run {direct:.1f} s; same "
          f"fingerprint: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
