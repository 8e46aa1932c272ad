"""How fresh each epoch's batches are, and what reading them costs, against the reader before.

Converts one mixed CSV (11 columns) into three datasets of the same records: shuffled into one
plain shard and into 8 GZIP shards, and one plain shard in input order; and its rows cut in
three (60%, 30%, 10%) into three sources of one plain shard each, read as a list and with
weights 0.2/0.3/0.5. Then, for this checkout and (with `--base REV`) an earlier one, each in
processes of its own taken in turn:

- *batch-mates that meet again*: of the pairs of records that share a global step (256) in
  epoch e, the share that share one in epoch e + 1 (epochs 0 -> 1 and 1 -> 2, the larger),
  against a full reshuffle each epoch, which gives (G - 1) / (N - 1) for N records;
- *source share spread*: of several sources, each source's share of a global step, its spread
  over random sampling's (sqrt(p (1 - p) / G)), the largest of the sources (1.0: as random
  sampling spreads it);
- *records/s*: `make_dataset` (seed 1, every feature parsed) over the first million records,
  best of three rounds: the shuffled datasets in their epoch order, and the input-order
  dataset through its block shuffle (the reader of datasets in input order). A tree that
  cannot read a dataset (weights, before they were read) has no row for it.

    python benchmarks/epoch_mix.py [ROWS] [--base REV] [--work DIR]

Prints one JSON line per tree and dataset, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from compare import checkout  # noqa: E402
from data import write_csv  # noqa: E402

GLOBAL_BATCH = 256
ROUNDS = 3
DATASETS = {
    "one plain shard": ["--num_shards=1"],
    "8 GZIP shards": ["--num_shards=8", "--compression=gzip"],
    "input order, one plain shard": ["--num_shards=1", "--order=input"],
}
SOURCES = (0.6, 0.3, 0.1)  # the rows' shares of the three sources, in id order
WEIGHTS = (0.2, 0.3, 0.5)


def meet_again(first: np.ndarray, second: np.ndarray, global_batch: int) -> float:
    """Of the pairs of records in one step of `first` (ids in read order), the share in one
    step of `second` (the same ids in another order)."""
    step_of = np.empty(len(second), np.int64)
    step_of[second] = np.arange(len(second)) // global_batch
    pairs = met = 0
    for start in range(0, len(first), global_batch):
        later = step_of[first[start : start + global_batch]]
        pairs += len(later) * (len(later) - 1) // 2
        _, counts = np.unique(later, return_counts=True)
        met += int((counts * (counts - 1) // 2).sum())
    return met / pairs


def source_bounds(rows: int) -> np.ndarray:
    """The first id of each source, and the end."""
    return np.round(np.cumsum([0, *SOURCES]) * rows).astype(np.int64)


def share_spread(epoch: np.ndarray, rows: int, shares: np.ndarray) -> float:
    """The largest of the sources' spreads of their share of a full step, over random
    sampling's."""
    full = len(epoch) // GLOBAL_BATCH * GLOBAL_BATCH
    steps = epoch[:full].reshape(-1, GLOBAL_BATCH)
    source = np.searchsorted(source_bounds(rows), steps, side="right") - 1
    ratios = [
        np.std((source == k).mean(axis=1)) / np.sqrt(p * (1 - p) / GLOBAL_BATCH)
        for k, p in enumerate(shares)
    ]
    return float(max(ratios))


def measure(path: str, rows: int, mixing: bool) -> dict:
    """Run in the tree under test: records/s, and with `mixing` the batch-mates' meetings and
    (several sources) the sources' share spread."""
    from tfdata_reader import make_dataset

    found: dict = {}
    named = json.loads(path) if path.startswith(("[", "{")) else path
    weighted = isinstance(named, dict)
    try:
        make_dataset(named, GLOBAL_BATCH)
    except ValueError as e:  # a tree before weights
        return {"unreadable": str(e)}
    if mixing:
        ds = make_dataset(named, GLOBAL_BATCH, features=["id"], label_key="", seed=1,
                          num_epochs=3)  # fmt: skip
        epochs = np.split(np.concatenate([b["id"].numpy() for b in ds]), 3)
        if not weighted:
            assert all(np.array_equal(np.sort(e), np.arange(rows)) for e in epochs), "not once"
            met = max(meet_again(epochs[e], epochs[e + 1], GLOBAL_BATCH) for e in range(2))
            found["vs_full_reshuffle"] = met / ((GLOBAL_BATCH - 1) / (rows - 1))
        if not isinstance(named, str):
            shares = np.array(WEIGHTS if weighted else SOURCES)
            found["share_spread"] = share_spread(epochs[0], rows, shares / shares.sum())
    ds = make_dataset(named, GLOBAL_BATCH, label_key="", seed=1, num_epochs=None)
    batches = iter(ds)
    limit = min(rows, 1_000_000) // GLOBAL_BATCH
    start = time.perf_counter()
    records = sum(int(next(batches)["id"].shape[0]) for _ in range(limit))
    found["records_per_s"] = records / (time.perf_counter() - start)
    return found


def _run(tree: pathlib.Path, path: pathlib.Path | str, rows: int, mixing: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, str(HERE / "epoch_mix.py"), "--measure", str(path), str(rows),
         *(["--mixing"] if mixing else [])],
        env=env, cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(
            f"{tree}: {str(path)[-60:]}: exit {done.returncode}\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", type=int, nargs="?", default=1_000_000)
    parser.add_argument("--base", help="an earlier revision to measure side by side")
    parser.add_argument("--work", default="bench_data/epoch_mix")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--mixing", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.rows, args.mixing)))
        return
    work = pathlib.Path(args.work).resolve()
    source = work / f"mixed_{args.rows}.csv"
    if not source.exists():
        write_csv(source, args.rows)
    paths = {}
    for name, flags in DATASETS.items():
        out = work / f"{name.replace(' ', '_').replace(',', '')}_{args.rows}"
        if not (out / "manifest.json").exists():
            subprocess.run(
                [sys.executable, "-m", "beam_jobs", "convert", "--input", str(source),
                 "--output", str(out), *flags],
                check=True, capture_output=True, cwd=ROOT,
            )  # fmt: skip
        paths[name] = out
    sources = _sources(source, work, args.rows)
    paths["3 sources, a list"] = json.dumps(sources)
    paths["3 sources, weights 0.2/0.3/0.5"] = json.dumps(dict(zip(sources, WEIGHTS, strict=True)))
    trees = {"this": ROOT} | ({"base": checkout(args.base, work)} if args.base else {})
    results: dict[tuple[str, str], dict] = {}
    for round_ in range(ROUNDS):
        for name, path in paths.items():
            for label, tree in trees.items():
                mixing = round_ == 0 and not name.startswith("input order")
                found = _run(tree, path, args.rows, mixing)
                if "unreadable" in found:
                    continue
                best = results.setdefault((label, name), found)
                best["records_per_s"] = max(best["records_per_s"], found["records_per_s"])
    for (label, name), found in results.items():
        print(json.dumps({"tree": label, "dataset": name, **found}))
    blocks = {label: results[(label, "input order, one plain shard")]["records_per_s"]
              for label in trees}  # fmt: skip
    print(f"\n{args.rows:,} records, global batch {GLOBAL_BATCH}, best of {ROUNDS}:\n")
    print(
        "| dataset | tree | records/s | vs input order (blocks) | vs base | meet again "
        "(x full reshuffle) | source share spread (x random) |\n|---|---|---|---|---|---|---|"
    )
    for (label, name), found in results.items():
        rate = found["records_per_s"]
        base = results.get(("base", name)) if "base" in trees else None
        versus = f"{rate / base['records_per_s']:.2f}x" if base else "-"
        print(f"| {name} | {label} | {rate:,.0f} | {rate / blocks[label]:.2f}x | {versus} | "
              f"{found.get('vs_full_reshuffle', float('nan')):.2f} | "
              f"{found.get('share_spread', float('nan')):.2f} |")  # fmt: skip


def _sources(source: pathlib.Path, work: pathlib.Path, rows: int) -> list[str]:
    """The CSV's rows cut into three sources by `SOURCES` (in id order, as written), each
    converted into one plain shard; their folders."""
    import csv

    bounds = source_bounds(rows)
    folders = [work / f"source{k}_{rows}" for k in range(len(SOURCES))]
    if all((f / "manifest.json").exists() for f in folders):
        return [str(f) for f in folders]
    with source.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        parts = [folder.with_suffix(".csv") for folder in folders]
        files = [p.open("w", newline="", encoding="utf-8") for p in parts]
        writers = [csv.writer(f) for f in files]
        for w in writers:
            w.writerow(header)
        for i, row in enumerate(reader):
            writers[int(np.searchsorted(bounds, i, side="right")) - 1].writerow(row)
        for f in files:
            f.close()
    for part, folder in zip(parts, folders, strict=True):
        subprocess.run(
            [sys.executable, "-m", "beam_jobs", "convert", "--input", str(part),
             "--output", str(folder), "--num_shards=1"],
            check=True, capture_output=True, cwd=ROOT,
        )  # fmt: skip
    return [str(f) for f in folders]


if __name__ == "__main__":
    main()
