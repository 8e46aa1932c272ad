"""Writes sample CSV files for the demo and tests: mixed types, quoting, missing values.

Columns: id (int64, unique across files), label (int64: 1 when x0 + x1 > 0), x0..x3 (float),
city (string, some with commas), note (string, with quotes and newlines in some rows, empty in
others), score (float, sometimes missing). Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import random

__all__ = ["write_sample_csv"]

COLUMNS = ["id", "label", "x0", "x1", "x2", "x3", "city", "note", "score"]
_CITIES = ["Zürich", "São Paulo", "Paris, TX", "Kyoto", 'The "Big" Apple', "Oslo"]


def _row(i: int, rng: random.Random) -> list[str]:
    xs = [f"{rng.uniform(-100, 100):.6f}" for _ in range(4)]
    note_kind = i % 10
    if note_kind == 0:
        note = ""
    elif note_kind == 1:
        note = f'line one of {i}\nline "two", with comma'
    else:
        note = f"note {rng.randrange(10**6)}"
    score = "" if i % 7 == 3 else f"{rng.random():.5f}"
    label = int(float(xs[0]) + float(xs[1]) > 0)
    return [str(i), str(label), *xs, _CITIES[i % len(_CITIES)], note, score]


def write_sample_csv(
    output: pathlib.Path, files: int, rows: int, seed: int = 0, first_id: int = 0
) -> list[str]:
    """Writes `files` CSV files of `rows` rows each, ids from `first_id` on; returns their
    paths."""
    output.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for k in range(files):
        path = output / f"part-{k:03d}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            writer.writerows(_row(first_id + k * rows + i, rng) for i in range(rows))
        paths.append(str(path))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", required=True, type=pathlib.Path)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=50_000, help="rows per file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first_id", type=int, default=0, help="another sample's ids: apart")
    args = parser.parse_args()
    paths = write_sample_csv(args.output, args.files, args.rows, args.seed, args.first_id)
    print(f"wrote {len(paths)} CSV files of {args.rows:,} rows each to {args.output}")


if __name__ == "__main__":
    main()
