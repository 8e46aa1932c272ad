"""Benchmark input: a CSV of mixed int, float and string columns, generated fast with numpy."""

from __future__ import annotations

import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

__all__ = ["write_csv"]

_WORDS = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf, hotel"])


def write_csv(path: pathlib.Path, rows: int, seed: int = 0, chunk: int = 500_000) -> int:
    """Writes `rows` rows of 11 columns (4 int, 4 float, 3 string); returns the file size."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink:
        writer = None
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            table = pa.table(
                {
                    "id": np.arange(start, start + n, dtype=np.int64),
                    "label": rng.integers(0, 2, n),
                    "count": rng.integers(0, 10_000, n),
                    "bucket": rng.integers(-500, 500, n),
                    "f0": rng.normal(size=n).round(6),
                    "f1": rng.uniform(0, 1000, n).round(3),
                    "f2": rng.normal(50, 10, n).round(4),
                    "f3": rng.exponential(size=n).round(5),
                    "word": _WORDS[rng.integers(0, len(_WORDS), n)],
                    "code": np.char.add("c", rng.integers(0, 10**6, n).astype(str)),
                    "text": np.char.add("item ", rng.integers(0, 10**9, n).astype(str)),
                }
            )
            if writer is None:
                writer = pcsv.CSVWriter(sink, table.schema)
            writer.write_table(table)
        writer.close()
    return path.stat().st_size
