"""`make bench-scale`: the terabyte path's costs, measured at two sizes each to show how they grow.

Parts (`--part`, default all; each prints a Markdown table, and all go to WORKDIR/results.md):
- `shards`: 2 rows a shard of benchmarks/data.py's CSV with `--num_shards N` for N = SHARDS / 10
  and SHARDS (default 20,000): the whole conversion (time, peak RSS of its largest process),
  publishing (the launcher's log line: time and manifest.json's size), `tfrecord-etl verify`,
  and `make_dataset`'s start-up (manifest, file list, first batch of 256) with its peak RSS.
  Each figure is also given per shard: a cost that grows faster shows as a larger one.
- `big`: GB files of ~1 GB of that CSV (made once, kept; default 10), converted with the
  defaults on the local runner, the first file alone and then all of them: time per input
  byte, peak RSS, and the peak disk space the run took above what was used before it,
  against the output's size (input order: the output; shuffled, the default: the output and
  its records uncompressed once more, the runs of the shuffle).
- `dask`: a Dask cluster of DASK_WORKERS worker processes (default 4; one thread each) on this
  machine converts a 2M-row file into 40, 2,000 and 8,000 shards; the local runner's dataset
  of 40 shards is compared byte for byte (fingerprint), and the launcher's peak RSS at each
  count is given (past on_dask.MAX_PARTITIONS it should not grow with the tasks).
- `gcs`: OBJECTS objects (default 100,000) in a gs:// bucket of the local storage emulator
  (gcp-storage-emulator on disk, seeded once through its own storage code: its uploads
  rewrite an index of every object each, too slow for this), planned with `convert
  --dry_run`: time and the launcher's peak RSS. The emulator answers a listing in one page;
  Cloud Storage pages 1,000 objects at a time.

    python benchmarks/scale.py [--part shards|big|dask|gcs] [--shards 20000] [--big_gb 10]
        [--dask_workers 4] [--objects 100000] [--workdir bench_data/scale]
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
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # support.gcs, support.dask_cluster

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


def _shards_part(work: pathlib.Path, shards_max: int) -> list[str]:
    lines = [
        "2 rows a shard; the local runner's defaults.",
        "",
        "| step | shards | seconds | ms a shard | peak RSS, largest process |",
        "|---|---|---|---|---|",
    ]
    for shards in (max(1, shards_max // 10), shards_max):
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
    return lines


BIG_ROWS = 12_000_000  # about 1.04 GB of benchmarks/data.py's CSV


def _folder_bytes(folder: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _big_part(work: pathlib.Path, gb: int) -> list[str]:
    folder = work / "big"
    files = []
    for k in range(gb):
        path = folder / f"part-{k:02d}.csv"
        if not path.exists():
            print(f"writing {path} ...", flush=True)
            write_csv(path, BIG_ROWS, seed=100 + k)
        files.append(path)
    lines = [
        "The defaults (local runner, default shard size, no compression).",
        "",
        "| input | seconds | s a GB of input | peak RSS, largest process | output | "
        "peak disk above the start |",
        "|---|---|---|---|---|---|",
    ]
    runs = {}
    for count in sorted({1, gb}):
        out = work / "out-big"
        shutil.rmtree(out, ignore_errors=True)
        pattern = str(files[0]) if count == 1 else str(folder / "part-*.csv")
        print(f"converting {count} GB-file(s) ...", flush=True)
        m = run_measured([PY, "-m", "beam_jobs", "convert", "--input", pattern, "--output",
                          str(out)], disk_of=str(work))  # fmt: skip
        input_bytes = sum(f.stat().st_size for f in files[:count])
        output_bytes = _folder_bytes(out)
        runs[count] = (m, input_bytes, output_bytes)
        per_gb = m.seconds / (input_bytes / 1e9)
        lines.append(
            f"| {count} file(s), {input_bytes / 1e9:.2f} GB | {m.seconds:.1f} | {per_gb:.1f} | "
            f"{m.peak_rss_bytes / 2**20:,.0f} MiB | {output_bytes / 1e9:.2f} GB | "
            f"{m.peak_disk_bytes / 1e9:.2f} GB ({m.peak_disk_bytes / output_bytes:.2f}x the "
            "output) |"
        )
        shutil.rmtree(out)
    if gb > 1:
        (small, small_in, _), (large, large_in, _) = runs[1], runs[gb]
        time_ratio = (large.seconds / large_in) / (small.seconds / small_in)
        rss_ratio = large.peak_rss_bytes / small.peak_rss_bytes
        lines += [
            "",
            f"Time per byte, {gb} GB against 1 GB: {time_ratio:.2f}x (bound 1.1x); "
            f"peak RSS: {rss_ratio:.2f}x (bound 1.1x).",
        ]
    return lines


def _dask_part(work: pathlib.Path, workers: int) -> list[str]:
    from support.dask_cluster import dask_cluster

    source = work / "dask-in" / "rows.csv"
    if not source.exists():
        write_csv(source, 2_000_000, seed=11)

    def convert(out: str, shards: int, *flags: str) -> Measured:
        shutil.rmtree(work / out, ignore_errors=True)
        return run_measured([PY, "-m", "beam_jobs", "convert", "--input", str(source),
                             "--output", str(work / out), "--num_shards", str(shards),
                             *flags])  # fmt: skip

    def fingerprint(m: Measured) -> str:
        return json.loads(m.stdout.splitlines()[-1])["fingerprint"]

    print("local runner, 40 shards ...", flush=True)
    local = convert("out-local", 40)
    runs = []
    cluster = work / "dask-cluster"
    cluster.mkdir(exist_ok=True)
    with dask_cluster(cluster, workers=workers) as address:
        for shards in (40, 2000, 8000):
            print(f"Dask, {workers} workers, {shards:,} shards ...", flush=True)
            flags = ["--runner", "DaskRunner", "--dask_client_address", address]
            runs.append((shards, convert(f"out-dask-{shards}", shards, *flags)))
    lines = [
        f"A 2M-row CSV ({source.stat().st_size / 1e6:.0f} MB); Dask: a scheduler and {workers} "
        "worker processes of one thread each on this machine.",
        "",
        "| run | shards (tasks) | seconds | launcher's peak RSS | dataset |",
        "|---|---|---|---|---|",
        f"| local runner | 40 | {local.seconds:.1f} | {local.peak_rss_bytes / 2**20:,.0f} MiB "
        f"(with its workers) | {fingerprint(local)[:19]}... |",
    ]
    for shards, m in runs:
        same = fingerprint(m) == fingerprint(local)
        what = "byte-identical to the local runner's" if same else "differs"
        lines.append(f"| Dask | {shards:,} | {m.seconds:.1f} | "
                     f"{m.peak_rss_bytes / 2**20:,.0f} MiB | "
                     f"{what if shards == 40 else fingerprint(m)[:19] + '...'} |")  # fmt: skip
    for name in ("out-local", *(f"out-dask-{s}" for s, _ in runs)):
        shutil.rmtree(work / name, ignore_errors=True)
    return lines


def _seed_bucket(data_dir: pathlib.Path, objects: int) -> None:
    """OBJECTS small CSV objects under gs://BUCKET/many/, written through the emulator's own
    storage code with one index write (its uploads rewrite the whole index each)."""
    from gcp_storage_emulator.handlers import buckets
    from gcp_storage_emulator.handlers.objects import _checksums, _make_object_resource
    from gcp_storage_emulator.storage import Storage
    from support.gcs import BUCKET

    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    storage = Storage(data_dir=str(data_dir))
    buckets.create_bucket(BUCKET, storage)
    index = storage.objects.setdefault(BUCKET, {})
    for i in range(objects):
        name = f"many/part-{i:06d}.csv"
        content = f"id,x,name\n{2 * i},{i * 0.5},a{i}\n{2 * i + 1},{-i},b{i}\n".encode()
        resource = _make_object_resource("http://127.0.0.1", BUCKET, name, "text/csv",
                                         str(len(content)))  # fmt: skip
        del resource["mediaLink"]  # its port is the emulator's of the day: clients make it
        storage._store.write_bytes(f"{BUCKET}/{name}", content)
        index[name] = _checksums(content, resource)
    storage._write_config_to_file()
    (data_dir / "seeded").write_text(str(objects))


def _gcs_part(work: pathlib.Path, objects: int) -> list[str]:
    from support.gcs import BUCKET, beam_env, storage_emulator

    data_dir = work / f"gcs-{objects}"
    if not (data_dir / "seeded").exists():
        print(f"seeding {objects:,} objects ...", flush=True)
        _seed_bucket(data_dir, objects)
    with storage_emulator(data_dir) as emulator:
        print(f"planning over {objects:,} gs:// objects ...", flush=True)
        # The CLI without Beam's credential lookup (20 s of retries with none to find).
        cli = str(ROOT / "tests" / "support" / "emulated_gcs_main.py")
        m = run_measured([PY, cli, "convert", "--input", f"gs://{BUCKET}/many/*.csv",
                          "--output", f"gs://{BUCKET}/out", "--dry_run"],
                         env=beam_env(emulator))  # fmt: skip
    said = dict(line.split(None, 1) for line in m.stdout.splitlines() if line[:1].isalpha()
                and len(line.split(None, 1)) == 2)  # fmt: skip
    plan = "; ".join(said.get(k, "?").strip() for k in ("inputs", "shards", "tasks"))
    return [
        f"`convert --dry_run` over gs://{BUCKET}/many/*.csv on the local storage emulator.",
        "",
        "| objects | seconds | ms per 1,000 objects | launcher's peak RSS | plan |",
        "|---|---|---|---|---|",
        f"| {objects:,} | {m.seconds:.1f} | {1e6 * m.seconds / objects:.1f} | "
        f"{m.peak_rss_bytes / 2**20:,.0f} MiB | {plan.split('plan: ', 1)[-1]} |",
    ]


PARTS = ("shards", "big", "dask", "gcs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--part", action="append", choices=PARTS, help="only these parts")
    parser.add_argument("--shards", type=int, default=20_000)
    parser.add_argument("--big_gb", type=int, default=10)
    parser.add_argument("--dask_workers", type=int, default=4)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("bench_data/scale"))
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    run = {
        "shards": lambda: _shards_part(work, args.shards),
        "big": lambda: _big_part(work, args.big_gb),
        "dask": lambda: _dask_part(work, args.dask_workers),
        "gcs": lambda: _gcs_part(work, args.objects),
    }
    text = f"Machine: {os.cpu_count()} cores.\n"
    for part in args.part or PARTS:
        lines = run[part]()
        section = "\n".join([f"### {part}", "", *lines, ""])
        print(section, flush=True)
        text += "\n" + section
    (work / "results.md").write_text(text)


if __name__ == "__main__":
    main()
