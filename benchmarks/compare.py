"""`make bench-compare BASE=<git revision>`: this checkout against an earlier one, side by side;
`make bench-shapes`: this checkout alone, on every shape of input.

The earlier code is checked out into a git worktree under WORKDIR (made once, kept), and both run
`convert` as separate processes (the whole process timed, imports included) from the same
venv, in turns (ABBA), on the same generated inputs: narrow rows (11 columns, 2M rows), narrow
with GZIP and with --splits, wide rows (26 columns, 24 of them floats) plain and with GZIP and
--splits, 1,000 and 5,000 columns, 1,000 and 4,000 small files and the 4,000's rows in one file,
a column with 3% values that are no integers (nor missing-value markers) past the sampled head
(dead letters) and the same file clean, and 16 rows (start-up). Prints each case's best time
of each side, their ratio, whether both sides published the same fingerprint (the same shard
bytes) in every run, and each side's ratios between cases (dirty / clean, GZIP and splits /
plain, many files / one file) and MB/s on many columns.

    python benchmarks/compare.py [--base 2148947] [--runs 3] [--workdir bench_data/compare]
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


def _wide(folder: pathlib.Path, rng: np.random.Generator) -> None:
    n = 400_000
    columns = {"id": np.arange(n), "k": rng.integers(0, 9, n)}
    columns |= {f"x{i}": rng.normal(size=n).round(5) for i in range(24)}
    folder.mkdir()
    pcsv.write_csv(pa.table(columns), str(folder / "wide.csv"))


def _dirty(folder: pathlib.Path, rng: np.random.Generator) -> None:
    n = 600_000
    values = rng.integers(0, 1000, n).astype(str).astype(object)
    bad = rng.random(n) < 0.03
    bad[:20_000] = False  # the sampled head is clean: the column is int64
    values[bad] = "unknown"  # no integer, and no missing-value marker (`n/a` would be)
    table = pa.table({"id": np.arange(n), "v": values.astype(str), "w": rng.normal(size=n)})
    folder.mkdir()
    pcsv.write_csv(table, str(folder / "dirty.csv"))


def _clean(folder: pathlib.Path, dirty: pathlib.Path) -> None:
    """The dirty file's twin with its bad values made good."""
    text = pcsv.ConvertOptions(column_types={"v": pa.string()})
    table = pcsv.read_csv(str(dirty / "dirty.csv"), convert_options=text)
    v = table.column("v").to_numpy(zero_copy_only=False).astype(object)
    v[v == "unknown"] = "7"
    folder.mkdir()
    clean = table.set_column(1, "v", pa.array(v, pa.string()))
    pcsv.write_csv(clean, str(folder / "clean.csv"))


def _mixed_columns(folder: pathlib.Path, rng: np.random.Generator) -> None:
    """400 rows of 3,000 columns: integers, floats and words in turn at random, 5% empty."""
    rows, columns = 400, 3000
    table = {}
    for j, kind in enumerate(rng.integers(0, 3, columns)):
        if kind == 0:
            values = rng.integers(-1000, 100_000, rows).astype(str)
        elif kind == 1:
            values = rng.normal(size=rows).round(4).astype(str)
        else:
            values = np.char.add("w", rng.integers(0, 500, rows).astype(str))
        table[f"c{j}"] = pa.array(values.tolist(), mask=rng.random(rows) < 0.05)
    folder.mkdir()
    pcsv.write_csv(pa.table(table), str(folder / "data.csv"))


def _mixed_rows(clean: pathlib.Path, latin: pathlib.Path, rng: np.random.Generator) -> None:
    """150,000 rows of mixed columns, and the same rows with 1% of names written in Latin-1 in
    the UTF-8 file (`José` as one byte 0xE9: bad rows, a dead letter each), past the sample."""
    n = 150_000
    names = np.array(["alice", "bob", "carol", "dave", "erin"])[rng.integers(0, 5, n)]
    bad = rng.random(n) < 0.01
    bad[:5000] = False
    columns = [np.arange(n).astype(str), names, rng.integers(0, 1000, n).astype(str),
               rng.normal(size=n).round(3).astype(str),
               np.array(["paris", "rome", "oslo"])[rng.integers(0, 3, n)]]  # fmt: skip
    for folder, damaged in ((clean, False), (latin, True)):
        columns[1] = np.where(bad, "Jos\xe9", names) if damaged else names
        folder.mkdir()
        with open(folder / "data.csv", "wb") as f:
            f.write(b"id,name,qty,price,city\n")
            for row in zip(*columns, strict=True):
                f.write(",".join(row).encode("latin-1") + b"\n")


def _many_and_one(many: pathlib.Path, one: pathlib.Path) -> None:
    """4,000 small files, and the same rows in one file."""
    for k in range(4000):
        write_csv(many / f"part-{k:04d}.csv", 50, seed=k)
    one.mkdir()
    with open(one / "all.csv", "wb") as f:
        for k in range(4000):
            data = (many / f"part-{k:04d}.csv").read_bytes()
            f.write(data if k == 0 else data[data.index(b"\n") + 1 :])


def _issue51_inputs(work: pathlib.Path, rng: np.random.Generator) -> None:
    if not (work / "mixed3000").exists():
        _mixed_columns(work / "mixed3000", rng)
    if not (work / "latin").exists():
        _mixed_rows(work / "mixed_clean", work / "latin", rng)


def _inputs(work: pathlib.Path) -> dict[str, tuple[str, list[str]]]:
    """Generates each case's input once; returns case -> (input pattern, flags)."""
    rng = np.random.default_rng(1)
    if not (work / "narrow").exists():
        for k in range(4):
            write_csv(work / "narrow" / f"part-{k}.csv", 500_000, seed=k)
    if not (work / "wide").exists():
        _wide(work / "wide", rng)
    if not (work / "many").exists():
        for k in range(1000):
            write_csv(work / "many" / f"part-{k:04d}.csv", 50, seed=k)
    if not (work / "dirty").exists():
        _dirty(work / "dirty", rng)
    if not (work / "clean").exists():
        _clean(work / "clean", work / "dirty")
    for columns, rows in ((1000, 10_000), (5000, 2_000)):
        folder = work / f"columns{columns}"
        if not folder.exists():
            folder.mkdir()
            table = pa.table({f"c{i}": rng.normal(size=rows).round(4) for i in range(columns)})
            pcsv.write_csv(table, str(folder / "data.csv"))
    if not (work / "many4000").exists():
        _many_and_one(work / "many4000", work / "one")
    if not (work / "tiny").exists():
        write_csv(work / "tiny" / "tiny.csv", 16)
    _issue51_inputs(work, rng)
    schema = work / "dirty_schema.json"  # the column stays int64 (not text) whatever the sample
    schema.write_text(json.dumps({"features": [{"name": "v", "dtype": "int64"}]}))
    target = ["--target_shard_bytes", "64MiB"]
    splits = ["--splits", "train=2,eval=1"]
    dirty = [*target, "--max_bad_fraction", "0.1", "--schema", str(schema)]
    return {
        "narrow": ("narrow/*.csv", target),
        "narrow, GZIP": ("narrow/*.csv", [*target, "--compression", "gzip"]),
        "narrow, --splits": ("narrow/*.csv", [*target, *splits]),
        "wide": ("wide/*.csv", target),
        "wide, GZIP and --splits": ("wide/*.csv", [*target, "--compression", "gzip", *splits]),
        "1,000 columns": ("columns1000/*.csv", target),
        "5,000 columns": ("columns5000/*.csv", target),
        "1,000 small files": ("many/*.csv", target),
        "4,000 small files": ("many4000/*.csv", target),
        "their rows in one file": ("one/*.csv", target),
        "3% dead letters": ("dirty/*.csv", dirty),
        "the same file clean": ("clean/*.csv", dirty),
        "3,000 mixed columns": ("mixed3000/*.csv", target),
        "1% names not UTF-8": ("latin/*.csv", [*target, "--max_bad_fraction", "0.1"]),
        "the same rows in UTF-8": ("mixed_clean/*.csv", [*target, "--max_bad_fraction", "0.1"]),
        "16 rows": ("tiny/*.csv", target),
    }


# Ratios between cases of one side (issue 32's goals), and input MB/s past the start-up.
RATIOS = [
    ("3% dead letters", "the same file clean", 1.3),
    ("wide, GZIP and --splits", "wide", 1.3),
    ("4,000 small files", "their rows in one file", 2.0),
    ("1% names not UTF-8", "the same rows in UTF-8", 1.3),
]
THROUGHPUT = [
    ("1,000 columns", "columns1000"),
    ("5,000 columns", "columns5000"),
    ("3,000 mixed columns", "mixed3000"),
]


def checkout(base: str, work: pathlib.Path) -> pathlib.Path:
    """A git worktree of `base` under `work` (made once, kept)."""
    # Named by the commit, not by what was typed: HEAD~1 names another commit tomorrow.
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", base],
                            check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    tree = work / f"tree-{commit}"
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


def _input_bytes(work: pathlib.Path, folder: str) -> int:
    return sum(p.stat().st_size for p in (work / folder).glob("*.csv"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", help="the earlier git revision (none: this checkout only)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=pathlib.Path, default=ROOT / "bench_data" / "compare")
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument("--plain", action="store_true",
                        help="also time plain Beam on the wide rows (minutes)")  # fmt: skip
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cases = _inputs(work)
    trees = {"this": ROOT} | ({"base": checkout(args.base, work)} if args.base else {})
    best: dict[str, dict[str, float]] = {side: {} for side in trees}
    if args.base:
        print(f"| case | {args.base}, best s | this checkout, best s | ratio | same shards |")
        print("|---|---|---|---|---|")
    else:
        print("| case | best s | runs, s |\n|---|---|---|")
    for case, (pattern, flags) in cases.items():
        if args.case and case not in args.case:
            continue
        seconds: dict[str, list[float]] = {side: [] for side in trees}
        prints: set[str | None] = set()
        for run in range(args.runs):
            for side in sorted(trees) if run % 2 == 0 else sorted(trees, reverse=True):
                took, fingerprint = _convert(trees[side], work, case, pattern, flags)
                seconds[side].append(took)
                prints.add(fingerprint)
        for side in trees:
            best[side][case] = min(seconds[side])
        this = best["this"][case]
        if not args.base:
            runs = ", ".join(f"{t:.2f}" for t in seconds["this"])
            print(f"| {case} | {this:.2f} | {runs} |", flush=True)
            continue
        base = best["base"][case]
        if None in prints:
            same = "not known (the earlier code prints no fingerprint)"
        else:
            same = "yes" if len(prints) == 1 else f"no ({len(prints)} fingerprints)"
        print(f"| {case} | {base:.2f} | {this:.2f} | {this / base:.2f}x | {same} |", flush=True)
    _shape_lines(best, work)
    if args.plain and "wide" in best["this"]:
        seconds = _plain_beam_wide(work)
        ours = best["this"]["wide"]
        print(f"\nplain Beam on the wide rows: {seconds:.1f} s, {seconds / ours:.1f}x this "
              f"checkout's {ours:.2f} s (goal >= 15x)")  # fmt: skip


def _plain_beam_wide(work: pathlib.Path) -> float:
    """ReadFromText | Map(Example) | WriteToTFRecord on the wide rows, a worker process per
    core on the local runner (as `make bench` runs it on narrow rows), timed whole."""
    out = work / "out" / "plain-wide"
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, str(HERE / "plain_beam.py"), str(work / "wide" / "*.csv"),
            str(out / "part"), "2", "--types", "ii" + "f" * 24, "--runner=FnApiRunner",
            "--direct_running_mode=multi_processing",
            f"--direct_num_workers={os.cpu_count() or 1}"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(
        argv, check=True, capture_output=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    )
    seconds = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return seconds


def _shape_lines(best: dict[str, dict[str, float]], work: pathlib.Path) -> None:
    """Each side's ratios between cases and its MB/s on many columns, where measured."""
    for side, times in best.items():
        lines = []
        for case, reference, goal in RATIOS:
            if case in times and reference in times:
                ratio = times[case] / times[reference]
                lines.append(f"{case} / {reference}: {ratio:.2f}x (goal <= {goal}x)")
        for case, folder in THROUGHPUT:
            if case in times and "16 rows" in times:
                mb = _input_bytes(work, folder) / 1e6
                past = times[case] - times["16 rows"]
                lines.append(f"{case}: {mb:.0f} MB, {mb / times[case]:.1f} MB/s whole, "
                             f"{mb / past:.1f} MB/s past the 16-row start-up")  # fmt: skip
        if "16 rows" in times:
            lines.append(f"16 rows (start-up): {times['16 rows']:.2f} s")
        if lines:
            print(f"\n{side}:\n" + "\n".join(f"- {line}" for line in lines))


if __name__ == "__main__":
    main()
