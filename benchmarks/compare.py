"""`make bench-compare BASE=<git revision>`: this checkout against an earlier one, side by side.

The earlier code is checked out into a git worktree under WORKDIR (made once, kept), and both run
`convert` as separate processes (the whole process timed, imports included) from the same
venv, in turns (ABBA), on the same generated inputs: narrow rows (11 columns, 2M rows), narrow
with GZIP and with --splits, wide rows (26 columns, 24 of them floats), 1,000 small files, and a
column with 3% values that are no integers (nor missing-value markers) past the sampled head
(dead letters). Prints each case's best time of each side, their ratio, and whether both sides
published the same fingerprint (the same shard bytes) in every run.

    python benchmarks/compare.py --base 2148947 [--runs 3] [--workdir bench_data/compare]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
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


def _inputs(work: pathlib.Path) -> dict[str, tuple[str, list[str]]]:
    """Generates each case's input once; returns case -> (input pattern, flags)."""
    rng = np.random.default_rng(1)
    if not (work / "narrow").exists():
        for k in range(4):
            write_csv(work / "narrow" / f"part-{k}.csv", 500_000, seed=k)
    if not (work / "wide").exists():
        n = 400_000
        columns = {"id": np.arange(n), "k": rng.integers(0, 9, n)}
        columns |= {f"x{i}": rng.normal(size=n).round(5) for i in range(24)}
        (work / "wide").mkdir()
        pcsv.write_csv(pa.table(columns), str(work / "wide" / "wide.csv"))
    if not (work / "many").exists():
        for k in range(1000):
            write_csv(work / "many" / f"part-{k:04d}.csv", 50, seed=k)
    if not (work / "dirty").exists():
        n = 600_000
        values = rng.integers(0, 1000, n).astype(str).astype(object)
        bad = rng.random(n) < 0.03
        bad[:20_000] = False  # the sampled head is clean: the column is int64
        values[bad] = "unknown"  # no integer, and no missing-value marker (`n/a` would be)
        table = pa.table({"id": np.arange(n), "v": values.astype(str), "w": rng.normal(size=n)})
        (work / "dirty").mkdir()
        pcsv.write_csv(table, str(work / "dirty" / "dirty.csv"))
    schema = work / "dirty_schema.json"  # the column stays int64 (not text) whatever the sample
    schema.write_text(json.dumps({"features": [{"name": "v", "dtype": "int64"}]}))
    target = ["--target_shard_bytes", "64MiB"]
    return {
        "narrow": ("narrow/*.csv", target),
        "narrow, GZIP": ("narrow/*.csv", [*target, "--compression", "gzip"]),
        "narrow, --splits": ("narrow/*.csv", [*target, "--splits", "train=2,eval=1"]),
        "wide": ("wide/*.csv", target),
        "1,000 small files": ("many/*.csv", target),
        "3% dead letters": (
            "dirty/*.csv",
            [*target, "--max_bad_fraction", "0.1", "--schema", str(schema)],
        ),
    }


def _checkout(base: str, work: pathlib.Path) -> pathlib.Path:
    tree = work / f"tree-{base}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), base],
                       check=True, capture_output=True)  # fmt: skip
    return tree


def _convert(tree: pathlib.Path, work: pathlib.Path, case: str, pattern: str, flags: list[str]):
    out = work / "out" / f"{tree.name}-{case.replace(' ', '_').replace(',', '')}"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="2")
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(work / pattern)]
    start = time.perf_counter()
    # From the tree's own folder: `python -m` puts the working folder first on sys.path, before
    # PYTHONPATH, so run from this checkout both sides would run this checkout's code.
    done = subprocess.run([*argv, "--output", str(out), *flags], env=env, capture_output=True,
                          text=True, cwd=tree)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{tree.name} {case}: exit {done.returncode}\n{done.stderr[-3000:]}")
    # Code older than the fingerprint (before 2026-12-03) does not print one.
    return seconds, json.loads(done.stdout.splitlines()[-1]).get("fingerprint")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", required=True, help="the earlier git revision")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=pathlib.Path, default=ROOT / "bench_data" / "compare")
    parser.add_argument("--case", action="append", help="only these cases")
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cases = _inputs(work)
    trees = {"base": _checkout(args.base, work), "this": ROOT}
    print(f"| case | {args.base}, best s | this checkout, best s | ratio | same shards |")
    print("|---|---|---|---|---|")
    for case, (pattern, flags) in cases.items():
        if args.case and case not in args.case:
            continue
        seconds: dict[str, list[float]] = {"base": [], "this": []}
        prints: set[str | None] = set()
        for run in range(args.runs):
            for side in ("base", "this") if run % 2 == 0 else ("this", "base"):
                took, fingerprint = _convert(trees[side], work, case, pattern, flags)
                seconds[side].append(took)
                prints.add(fingerprint)
        base, this = min(seconds["base"]), min(seconds["this"])
        if None in prints:
            same = "not known (the earlier code prints no fingerprint)"
        else:
            same = "yes" if len(prints) == 1 else f"no ({len(prints)} fingerprints)"
        print(f"| {case} | {base:.2f} | {this:.2f} | {this / base:.2f}x | {same} |", flush=True)


if __name__ == "__main__":
    main()
