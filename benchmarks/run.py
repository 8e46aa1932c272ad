"""`make bench`: conversion and reading throughput against baselines, measured in one run.

Generates its own CSV (4 int, 4 float, 3 string columns), then measures on this machine:
our `convert` (default local runner, one worker per core), the same on a Dask cluster (one
single-threaded worker process per core on 127.0.0.1), the plain Beam pipeline on the same
runner and worker count, the one-process library loop, GZIP output, --splits, both, statistics
turned off (their cost), 4x the input, our Example
encoder against tfx-bsl's (speed, and GZIP size with their feature orders), reading, and the
shard planner on a synthetic 1 TB listing. Prints a Markdown table and writes it to
WORKDIR/results.md.

    python benchmarks/run.py [--rows 2000000] [--workdir bench_data] [--skip_plain]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import shutil
import sys
import time
import tracemalloc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # support.dask_cluster

from data import write_csv  # noqa: E402
from measure import Measured, run_measured  # noqa: E402
from support.dask_cluster import dask_cluster  # noqa: E402

from beam_jobs.core.inputs import InputFile  # noqa: E402
from beam_jobs.formats.lines.cut_counts import segments_between_cuts  # noqa: E402
from beam_jobs.plan.shards import choose_num_shards, cut_points, plan_shards  # noqa: E402
from tfdata_reader.manifest import Manifest  # noqa: E402

PY = sys.executable
FILES = 4
TARGET = "64MiB"
SPLITS = "train=2,eval=1"  # TFX ExampleGen's default split


def _inputs(workdir: pathlib.Path, name: str, rows: int) -> tuple[str, int]:
    folder = workdir / name
    if folder.exists():
        shutil.rmtree(folder)
    size = sum(write_csv(folder / f"part-{k}.csv", rows // FILES, seed=k) for k in range(FILES))
    return str(folder / "*.csv"), size


def _convert(
    pattern: str, out: pathlib.Path, *flags: str, program: tuple[str, ...] = ("-m", "beam_jobs")
) -> tuple[Measured, Manifest]:
    shutil.rmtree(out, ignore_errors=True)
    measured = run_measured(
        [
            PY,
            *program,
            "convert",
            "--input",
            pattern,
            "--output",
            str(out),
            "--target_shard_bytes",
            TARGET,
            *flags,
        ]
    )
    manifest = Manifest.from_json((out / "manifest.json").read_text())
    return measured, manifest


def _row(name, rows, in_bytes, m: Measured, extra="") -> dict:
    return {
        "name": name,
        "rows": rows,
        "seconds": m.seconds,
        "rows_per_s": rows / m.seconds,
        "mb_per_s": in_bytes / 1e6 / m.seconds,
        "rss_mb": m.peak_rss_bytes / 2**20,
        "extra": extra,
    }


def _shards_note(manifest: Manifest) -> str:
    sizes = [s.bytes for s in manifest.shards]
    return (
        f"{len(sizes)} shards, {min(sizes) / 2**20:.1f}-{max(sizes) / 2**20:.1f} MiB "
        f"(max/min {max(sizes) / min(sizes):.2f})"
    )


def _planner(ratio: float) -> dict:
    """Plans 1 TB over 20,000 files from sizes alone, as the launcher would."""
    rng = random.Random(0)
    sizes = [rng.randint(10, 90) for _ in range(20_000)]
    scale = 10**12 / sum(sizes)
    files = [
        InputFile(f"gs://bucket/raw/part-{i:05d}.csv", int(s * scale)) for i, s in enumerate(sizes)
    ]
    tracemalloc.start()
    start = time.perf_counter()
    total = sum(f.size for f in files)
    count = choose_num_shards(total * ratio, 256 * 2**20, total / 100)
    shards = plan_shards(files, count)
    segments = segments_between_cuts(cut_points(shards))
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    per_shard = [s.input_bytes for s in shards]
    return {
        "seconds": seconds,
        "peak_mb": peak / 2**20,
        "shards": count,
        "pieces": sum(len(s.pieces) for s in shards),
        "segments": len(segments),
        "balance": max(per_shard) / min(per_shard),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("bench_data"))
    parser.add_argument("--skip_plain", action="store_true", help="skip the slow plain Beam run")
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    rows, rows4 = args.rows, 4 * args.rows
    workers = os.cpu_count() or 1

    print(f"generating {rows:,} and {rows4:,} rows of CSV in {work} ...", flush=True)
    pattern, in_bytes = _inputs(work, "in_1x", rows)
    pattern4, in_bytes4 = _inputs(work, "in_4x", rows4)
    files = sorted(str(p) for p in (work / "in_1x").glob("*.csv"))
    os.sync()  # let the writes of generation settle before anything is timed

    table = []
    print("convert (ours) ...", flush=True)
    ours, manifest = _convert(pattern, work / "out_1x")
    table.append(
        _row("ours: convert, default local runner", rows, in_bytes, ours, _shards_note(manifest))
    )
    print("convert --order input (the order every conversion kept before) ...", flush=True)
    kept, kept_manifest = _convert(pattern, work / "out_input", "--order", "input")
    table.append(
        _row("ours: convert, --order input", rows, in_bytes, kept, _shards_note(kept_manifest))
    )
    kept_gz, _ = _convert(pattern, work / "out_input_gz", "--order", "input", "--compression",
                          "gzip")  # fmt: skip
    print("convert --compression gzip ...", flush=True)
    gz, gz_manifest = _convert(pattern, work / "out_gz", "--compression", "gzip")
    table.append(_row("ours: convert, GZIP", rows, in_bytes, gz, _shards_note(gz_manifest)))
    table.append(_row("ours: convert, GZIP, --order input", rows, in_bytes, kept_gz))
    shutil.rmtree(work / "out_input_gz")
    print("convert --splits, and GZIP with --splits ...", flush=True)
    splits, _ = _convert(pattern, work / "out_splits", "--splits", SPLITS)
    table.append(_row(f"ours: convert, --splits {SPLITS}", rows, in_bytes, splits))
    both, _ = _convert(pattern, work / "out_both", "--splits", SPLITS, "--compression", "gzip")
    table.append(_row(f"ours: convert, GZIP and --splits {SPLITS}", rows, in_bytes, both))
    # The split hash of one feature instead of every feature's value.
    keyed, _ = _convert(pattern, work / "out_keyed", "--splits", SPLITS, "--split_key", "id")
    table.append(_row(f"ours: convert, --splits {SPLITS} --split_key id", rows, in_bytes, keyed))
    print("convert without statistics, and with them again ...", flush=True)
    # Their cost is a few percent, within one run's noise here: the best of two runs each,
    # taken in turns.
    no_stats_runs, with_stats = [], [ours]
    without = (str(HERE / "convert_no_stats.py"),)
    for _ in range(2):
        no_stats_runs.append(_convert(pattern, work / "out_no_stats", program=without)[0])
        with_stats.append(_convert(pattern, work / "out_no_stats")[0])
    no_stats = min(no_stats_runs, key=lambda m: m.seconds)
    stats_cost = min(m.seconds for m in with_stats) / no_stats.seconds - 1
    table.append(_row("ours: convert, statistics turned off", rows, in_bytes, no_stats))
    for name in ("out_gz", "out_splits", "out_both", "out_keyed", "out_no_stats"):
        shutil.rmtree(work / name)
    print(f"convert on a Dask cluster of {workers} single-threaded workers ...", flush=True)
    (work / "dask").mkdir(exist_ok=True)
    with dask_cluster(work / "dask", workers=workers) as address:
        on_dask, dask_manifest = _convert(
            pattern, work / "out_dask", "--runner", "DaskRunner", "--dask_client_address", address
        )
    shutil.rmtree(work / "out_dask")
    table.append(
        _row(
            f"ours: convert, Dask ({workers} workers on 127.0.0.1; RSS of the launcher)",
            rows,
            in_bytes,
            on_dask,
            _shards_note(dask_manifest),
        )
    )
    print("convert 4x input ...", flush=True)
    ours4, manifest4 = _convert(pattern4, work / "out_4x")
    table.append(_row("ours: convert, 4x input", rows4, in_bytes4, ours4, _shards_note(manifest4)))

    print("local runner settings ...", flush=True)
    small_pattern, small_bytes = _inputs(work, "in_small", rows // 10)
    settings = []
    for label, pat, n, size in (("small", small_pattern, rows // 10, small_bytes),
                                ("4x", pattern4, rows4, in_bytes4)):  # fmt: skip
        fixed, _ = _convert(pat, work / "out_setting")
        unfixed, _ = _convert(
            pat, work / "out_setting", program=(str(HERE / "convert_unfixed.py"),)
        )
        procs, _ = _convert(pat, work / "out_setting", "--direct_running_mode=multi_processing")
        settings.append((label, n, size, fixed, unfixed, procs))
    shutil.rmtree(work / "out_setting")
    shutil.rmtree(work / "out_4x", ignore_errors=True)

    print("library loop (one process) ...", flush=True)
    loop = run_measured([PY, str(HERE / "library_loop.py"), str(work / "loop.tfrecord"), *files])
    table.append(
        _row("baseline: pyarrow -> tfx-bsl -> TFRecordWriter, 1 process", rows, in_bytes, loop)
    )
    plain = None
    if not args.skip_plain:
        print("plain Beam pipeline (slow) ...", flush=True)
        plain_out = work / "plain"
        shutil.rmtree(plain_out, ignore_errors=True)
        plain = run_measured(
            [
                PY,
                str(HERE / "plain_beam.py"),
                pattern,
                str(plain_out / "part"),
                str(len(manifest.shards)),
                "--runner=FnApiRunner",
                "--direct_running_mode=multi_processing",
                f"--direct_num_workers={workers}",
            ]
        )
        table.append(
            _row("baseline: ReadFromText | Map(Example) | WriteToTFRecord", rows, in_bytes, plain)
        )
        shutil.rmtree(plain_out)

    print("encoders, on one input file ...", flush=True)
    encode = json.loads(run_measured([PY, str(HERE / "encode_bench.py"), files[0]]).stdout)

    print("reading ...", flush=True)
    read = json.loads(
        run_measured(
            [PY, str(HERE / "read_bench.py"), str(work / "out_1x"), "256", str(work / "out_input")]
        ).stdout
    )
    shutil.rmtree(work / "out_input")
    planner = _planner(manifest.total_bytes / in_bytes)

    lines = [
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.machine()}; {rows:,} rows ({in_bytes / 1e6:.0f} MB of CSV in {FILES} files), "
        f"target {TARGET}, {workers} local workers.",
        "",
        "| conversion | rows | seconds | rows/s | input MB/s | peak RSS, largest process "
        "| vs plain Beam | vs library loop | output |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        vs_plain = f"{r['rows_per_s'] / (rows / plain.seconds):.1f}x" if plain else "-"
        vs_loop = f"{r['rows_per_s'] / (rows / loop.seconds):.2f}x"
        lines.append(
            f"| {r['name']} | {r['rows']:,} | {r['seconds']:.1f} | {r['rows_per_s']:,.0f} | "
            f"{r['mb_per_s']:.1f} | {r['rss_mb']:.0f} MiB | {vs_plain} | {vs_loop} | {r['extra']} |"
        )
    growth = ours4.peak_rss_bytes / ours.peak_rss_bytes - 1
    lines += [
        "",
        "Against the plain conversion in this run: "
        + ", ".join(
            f"{label} {m.seconds / ours.seconds:.2f}x"
            for label, m in (
                ("GZIP", gz),
                ("--splits", splits),
                ("both", both),
                ("--splits by --split_key", keyed),
            )
        )
        + f"; statistics cost {stats_cost:+.1%} of the time without them (best of 3 runs with, "
        "2 without).",
        "",
        f"Dask against the local runner, same input, {workers} workers each: "
        f"{on_dask.seconds:.1f} s against {ours.seconds:.1f} s, "
        f"{on_dask.seconds / ours.seconds:.2f}x the local runner's time.",
        "",
        f"Memory: 4x the input changes the largest process's peak RSS by {growth:+.0%} "
        f"({ours.peak_rss_bytes / 2**20:.0f} -> {ours4.peak_rss_bytes / 2**20:.0f} MiB).",
        "",
        f"Example encoding, {encode['rows']:,} rows of one input file in {encode['batches']} "
        f"batches ({encode['example_bytes'] / 1e6:.0f} MB of Examples), best of 3:",
        "",
        "| encoder | seconds | MB of Examples/s | GZIP shard size (default level 1) |",
        "|---|---|---|---|",
    ]
    for label, key in [
        ("ours: features in the manifest's order", "ours"),
        ("tfx-bsl's RecordBatchToExamplesEncoder (hash order, used before)", "tfx_bsl"),
    ]:
        seconds, gz = encode[f"{key}_seconds"], encode[f"{key}_gzip_bytes"]
        lines.append(
            f"| {label} | {seconds:.2f} | {encode['example_bytes'] / 1e6 / seconds:.0f} | "
            f"{gz / 1e6:.2f} MB ({gz / encode['tfx_bsl_gzip_bytes'] - 1:+.1%}) |"
        )
    lines += [
        "",
        f"Our encoder: {encode['tfx_bsl_seconds'] / encode['ours_seconds']:.2f}x tfx-bsl's speed.",
        "",
        "| reading (batch 256, first 1M records) | records/s | vs raw ceiling | vs hand-written |",
        "|---|---|---|---|",
    ]
    for name, label in [
        ("raw_ceiling", "raw ceiling: interleave(TFRecordDataset) -> batch, no parsing"),
        ("make_dataset", "ours: make_dataset (shuffle, seed=1): a shuffled dataset, epoch order"),
        ("make_dataset_input_order", "ours: make_dataset (shuffle, seed=1): input order, blocks"),
        ("make_dataset_no_shuffle", "ours: make_dataset (shuffle=False)"),
        ("hand_written", "hand-written: TFRecordDataset.map(parse_single_example).batch"),
        ("tfxio", "tfx-bsl: TFExampleRecord(schema.pbtxt).TensorFlowDataset (its defaults)"),
        ("tfxio_no_shuffle", "tfx-bsl: the same, shuffle=False"),
    ]:
        lines.append(
            f"| {label} | {read[name]:,.0f} | {read[name] / read['raw_ceiling']:.0%} | "
            f"{read[name] / read['hand_written']:.1f}x |"
        )
    lines += [
        "",
        "The epoch order of a shuffled dataset against the shuffled blocks of one in input "
        f"order: {read['make_dataset'] / read['make_dataset_input_order']:.2f}x.",
        "",
        "make_dataset against TFXIO on the same shards: "
        f"{read['make_dataset'] / read['tfxio']:.2f}x shuffled, "
        f"{read['make_dataset_no_shuffle'] / read['tfxio_no_shuffle']:.2f}x in order.",
        "",
        "| local runner (convert, whole process timed) | rows | threads, timed flush off "
        "(chosen) | threads, Beam's timed flush (before; can drop rows) | worker processes |",
        "|---|---|---|---|---|",
    ]
    for label, n, size, fixed, unfixed, procs in settings:
        lines.append(
            f"| {label} input ({size / 1e6:.0f} MB) | {n:,} | {fixed.seconds:.1f} s | "
            f"{unfixed.seconds:.1f} s ({unfixed.seconds / fixed.seconds:.2f}x) | "
            f"{procs.seconds:.1f} s ({procs.seconds / fixed.seconds:.2f}x) |"
        )
    lines += [
        "",
        f"Shard planner, 1 TB over 20,000 input files (sizes only): {planner['shards']:,} shards, "
        f"{planner['pieces']:,} pieces, {planner['segments']:,} cut-count segments, input bytes "
        f"per shard max/min {planner['balance']:.4f}, in {planner['seconds']:.2f} s and "
        f"{planner['peak_mb']:.0f} MiB peak traced memory.",
    ]
    text = "\n".join(lines)
    (work / "results.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
