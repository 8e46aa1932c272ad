"""GZIP levels on a shard's worth of our records, against what TFX CsvExampleGen stores.

CsvExampleGen writes the same rows as tfx-bsl's Examples (features in hash order) compressed
by TensorFlow's GZIP at zlib's default level 6. This encodes one CSV file both ways, frames the
records, and compresses ours at each of our levels (ISA-L 1-3, zlib 4-9) and at zlib's
level 6: prints each one's bytes against CsvExampleGen's and its speed against zlib level 6's
(best of 3, one core).

    python benchmarks/gzip_levels.py INPUT.csv
"""

from __future__ import annotations

import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

import pyarrow.csv as pcsv
from encode_bench import _DTYPES, _TfxBsl

from beam_jobs.codec.deflate import compressor, engine
from beam_jobs.codec.examples import ExampleEncoder
from beam_jobs.codec.framing import frame_records
from tfdata_reader.manifest import FeatureSpec

_CHUNK = 1 << 20


def _zlib(level: int) -> Any:
    return zlib.compressobj(level, zlib.DEFLATED, 31)


def _compressed(
    data: bytes, level: int, new: Callable[[int], Any] = compressor
) -> tuple[int, float]:
    """Bytes and best-of-3 seconds for `data` fed in 1 MiB pieces, as a shard writer feeds it."""
    best, size = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        c = new(level)
        size = sum(len(c.compress(data[i : i + _CHUNK])) for i in range(0, len(data), _CHUNK))
        size += len(c.flush())
        best = min(best, time.perf_counter() - started)
    return size, best


def main() -> None:
    batches = list(pcsv.open_csv(sys.argv[1]))
    features = [FeatureSpec(f.name, _DTYPES[str(f.type)]) for f in batches[0].schema]
    ours = frame_records([r for b in batches for r in ExampleEncoder(features).encode(b)])
    theirs = frame_records([r for b in batches for r in _TfxBsl(features).encode(b)])
    reference, _ = _compressed(theirs, 6, _zlib)
    zlib_size, zlib6 = _compressed(ours, 6, _zlib)
    mb = len(ours) / 1e6
    print(f"{mb:.0f} MB of framed records; CsvExampleGen (tfx-bsl order, zlib 6): "
          f"{reference / 1e6:.2f} MB\n")  # fmt: skip
    print("| ours at level | library | MB | vs CsvExampleGen's bytes | MB/s | vs zlib 6's speed |")
    print("|---|---|---|---|---|---|")
    print(f"| 6 | zlib | {zlib_size / 1e6:.2f} | {zlib_size / reference:.3f}x | "
          f"{mb / zlib6:.0f} | 1.0x |")  # fmt: skip
    for level in range(1, 10):
        size, seconds = _compressed(ours, level)
        print(f"| {level} | {engine(level)} | {size / 1e6:.2f} | {size / reference:.3f}x | "
              f"{mb / seconds:.0f} | {zlib6 / seconds:.1f}x |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
