"""How fresh each epoch's batches are, and what reading them costs.

Converts one mixed CSV (11 columns) into a shuffled dataset of one plain shard and one of 8
GZIP shards, then, for each:

- *batch-mates that meet again*: of the pairs of records that share a global step in epoch e,
  the share that share one in epoch e + 1 (epochs 0 -> 1 and 1 -> 2), against a full reshuffle
  each epoch, which gives (G - 1) / (N - 1) for a global batch G of N records;
- *records/s*: `make_dataset` (shuffled epoch order, seed 1) against the same records read in
  order (`shuffle=False`), over the first million records, best of three rounds taken in turn.

    python benchmarks/epoch_mix.py [ROWS] [--work DIR]

Prints one JSON line per dataset.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from data import write_csv

GLOBAL_BATCH = 256
ROUNDS = 3


def meet_again(first: np.ndarray, second: np.ndarray, global_batch: int) -> float:
    """Of the pairs of records in one step of `first` (ids in read order), the share in one
    step of `second` (the same ids in another order)."""
    step_of = np.empty(len(second), np.int64)
    step_of[second] = np.arange(len(second)) // global_batch
    pairs = met = 0
    for start in range(0, len(first), global_batch):
        later = step_of[first[start : start + global_batch]]
        n = len(later)
        pairs += n * (n - 1) // 2
        _, counts = np.unique(later, return_counts=True)
        met += int((counts * (counts - 1) // 2).sum())
    return met / pairs


def epochs(path: str, count: int) -> list[np.ndarray]:
    from tfdata_reader import make_dataset

    ds = make_dataset(path, GLOBAL_BATCH, features=["id"], label_key="", seed=1, num_epochs=count)
    ids = np.concatenate([b["id"].numpy() for b in ds])
    return np.split(ids, count)


def rate(ds, limit: int) -> float:
    batches = iter(ds)
    start = time.perf_counter()
    records = sum(int(next(batches)["id"].shape[0]) for _ in range(limit))
    elapsed = time.perf_counter() - start
    del batches
    return records / elapsed


def measure(path: str, rows: int) -> dict:
    from tfdata_reader import make_dataset

    found: dict = {"dataset": pathlib.Path(path).name, "records": rows}
    e0, e1, e2 = epochs(path, 3)
    assert all(sorted(e.tolist()) == list(range(rows)) for e in (e0, e1, e2)), "not exactly once"
    full = (GLOBAL_BATCH - 1) / (rows - 1)
    found["meet_again_0_1"] = meet_again(e0, e1, GLOBAL_BATCH)
    found["meet_again_1_2"] = meet_again(e1, e2, GLOBAL_BATCH)
    found["full_reshuffle"] = full
    found["vs_full_reshuffle"] = max(found["meet_again_0_1"], found["meet_again_1_2"]) / full
    limit = min(rows, 1_000_000) // GLOBAL_BATCH
    speeds: dict[str, float] = {}
    for _ in range(ROUNDS):
        for name, overrides in (("shuffled", {"seed": 1}), ("in_order", {"shuffle": False})):
            ds = make_dataset(path, GLOBAL_BATCH, label_key="", num_epochs=None, **overrides)
            speeds[name] = max(speeds.get(name, 0.0), rate(ds, limit))
    found["records_per_s"] = {k: round(v) for k, v in speeds.items()}
    found["shuffled_vs_in_order"] = speeds["shuffled"] / speeds["in_order"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rows", type=int, nargs="?", default=1_000_000)
    parser.add_argument("--work", default="bench_data/epoch_mix")
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    source = work / f"mixed_{args.rows}.csv"
    if not source.exists():
        write_csv(source, args.rows)
    for name, flags in (
        ("one_plain_shard", ["--num_shards=1"]),
        ("eight_gzip_shards", ["--num_shards=8", "--compression=gzip"]),
    ):
        out = work / f"{name}_{args.rows}"
        if not (out / "manifest.json").exists():
            subprocess.run(
                [sys.executable, "-m", "beam_jobs", "convert", "--input", str(source),
                 "--output", str(out), *flags],
                check=True, capture_output=True,
            )  # fmt: skip
        print(json.dumps(measure(str(out), args.rows)), flush=True)


if __name__ == "__main__":
    main()
