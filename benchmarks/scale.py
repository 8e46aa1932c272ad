"""`make bench-scale`: the many-shard path, measured at two sizes to show how each cost grows.

Converts 2 rows a shard of benchmarks/data.py's CSV with `--num_shards N` for N = SHARDS / 10
and SHARDS (default 20,000), each into its own output, and measures on this machine: the whole
conversion (time, peak RSS of its largest process), publishing (the launcher's log line: time
and manifest.json's size), `tfrecord-etl verify` of the output, and `make_dataset`'s start-up
(manifest read, file list, first batch of 256) with its peak RSS. Each figure is also given per
shard; a cost that grows faster than the shards shows as a larger per-shard figure at SHARDS.
Prints a Markdown table and writes it to WORKDIR/results.md.

    python benchmarks/scale.py [--shards 20000] [--workdir bench_data/scale]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from data import write_csv  # noqa: E402
from measure import Measured, run_measured  # noqa: E402

PY = sys.executable
_PUBLISHED = re.compile(r"published ([\d,]+) shards? and their statistics in ([\d.]+) s "
                        r"\(manifest\.json: ([^)]+)\)")  # fmt: skip
_READER = """
import json, sys, time
start = time.perf_counter()
from tfdata_reader import make_dataset
imported = time.perf_counter()
batch = next(iter(make_dataset(sys.argv[1], 256, seed=1)))
print(json.dumps({"import_s": imported - start, "first_batch_s": time.perf_counter() - imported}))
"""


def _convert(work: pathlib.Path, shards: int) -> dict[str, object]:
    rows = 2 * shards
    source = work / f"in-{rows}" / "rows.csv"
    if not source.exists():
        write_csv(source, rows, seed=7)
    out = work / f"out-{shards}"
    shutil.rmtree(out, ignore_errors=True)
    convert = run_measured([PY, "-m", "beam_jobs", "convert", "--input", str(source), "--output",
                            str(out), "--num_shards", str(shards)])  # fmt: skip
    published = _PUBLISHED.search(convert.stderr)
    if published is None:
        raise SystemExit(f"no publishing line in the log:\n{convert.stderr[-2000:]}")
    verify = run_measured([PY, "-m", "beam_jobs", "verify", str(out)])
    reader = run_measured([PY, "-c", _READER, str(out)])
    started = json.loads(reader.stdout.splitlines()[-1])
    return {
        "shards": shards,
        "convert": convert,
        "publish_s": float(published.group(2)),
        "manifest": published.group(3),
        "verify": verify,
        "reader": reader,
        "first_batch_s": started["first_batch_s"],
    }


def _row(name: str, r: dict[str, object], seconds: float, rss: int | None = None) -> str:
    shards = int(r["shards"])  # type: ignore[call-overload]
    memory = f"{rss / 2**20:,.0f} MiB" if rss is not None else "-"
    return (f"| {name} | {shards:,} | {seconds:.1f} | {1e3 * seconds / shards:.2f} | "
            f"{memory} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=20_000)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("bench_data/scale"))
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    lines = [
        f"Machine: {os.cpu_count()} cores; 2 rows a shard; the local runner's defaults.",
        "",
        "| step | shards | seconds | ms a shard | peak RSS, largest process |",
        "|---|---|---|---|---|",
    ]
    for shards in (max(1, args.shards // 10), args.shards):
        print(f"{shards:,} shards ...", flush=True)
        r = _convert(work, shards)
        convert, verify, reader = (r[k] for k in ("convert", "verify", "reader"))
        assert isinstance(convert, Measured) and isinstance(verify, Measured)
        assert isinstance(reader, Measured)
        lines += [
            _row("convert, whole run", r, convert.seconds, convert.peak_rss_bytes),
            _row(f"of it publishing (manifest.json {r['manifest']})", r, float(r["publish_s"])),  # type: ignore[arg-type]
            _row("verify", r, verify.seconds, verify.peak_rss_bytes),
            _row("make_dataset: first batch", r, float(r["first_batch_s"]), reader.peak_rss_bytes),  # type: ignore[arg-type]
        ]
        shutil.rmtree(work / f"out-{shards}")
    text = "\n".join(lines)
    print(text)
    (work / "results.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
