"""Silent element loss on Beam 2.77 FnApiRunner multi_threading (SDK-side periodic data-plane flush race).
Run from the project root: .venv/bin/python docs/beam_flush_race.py --n 1000000 --repeat 5   (loses one contiguous block in ~half the runs)
Control: add --worker_flush_ms 0 (or --flush_ms 0) and no run loses; other switches: --no_side --no_partition --sink --reshuffle.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import struct
import sys
import tempfile
import time
import zlib

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions


class Explode(beam.DoFn):
    """One input element -> n records, like CsvExampleGen's whole-file reader DoFn."""

    def __init__(self, payload: int):
        self.payload = payload

    def process(self, n):
        pad = "x" * self.payload
        for i in range(n):
            yield f"{i},{i % 7},{pad}"


def parse(line):  # like tfx_bsl ParseCSVLine: (cells, raw line)
    PARSED.inc()
    return line.split(","), line


PARSED = beam.metrics.Metrics.counter("probe", "parsed")     # counted in the producing stage
CONVERTED = beam.metrics.Metrics.counter("probe", "converted")  # counted in the consuming stage


class Infer(beam.CombineFn):  # stands in for ColumnTypeInferrer: needs to see every row
    def create_accumulator(self):
        return 0

    def add_input(self, acc, cells):
        return max(acc, len(cells))

    def merge_accumulators(self, accs):
        return max(accs)

    def extract_output(self, acc):
        return acc


class ToRecord(beam.DoFn):
    def process(self, cells, ncols=None):
        if ncols is not None and len(cells) != ncols:
            raise ValueError(cells)
        CONVERTED.inc()
        yield ",".join(cells).encode()


def part_fn(rec, n):
    return zlib.crc32(rec) % n


def run_once(a, outdir):
    opts = [f"--runner={a.runner}", f"--direct_num_workers={a.workers}",
            f"--direct_running_mode={a.mode}"]
    ids_out = os.path.join(outdir, "ids")
    p = beam.Pipeline(options=PipelineOptions(opts))
    if True:
        lines = (p | "Create" >> beam.Create([a.n])
                 | "Explode" >> beam.ParDo(Explode(a.payload))
                 | "Parse" >> beam.Map(parse)
                 | "Keys" >> beam.Keys())
        if a.no_side:
            recs = lines | "ToRecord" >> beam.ParDo(ToRecord())
        else:
            side = beam.pvalue.AsSingleton(lines | "Infer" >> beam.CombineGlobally(Infer()))
            recs = lines | "ToRecord" >> beam.ParDo(ToRecord(), side)
        if a.no_partition:
            parts = [recs]
        else:
            parts = recs | "Split" >> beam.Partition(part_fn, 3)
        for k, pc in enumerate(parts):
            if a.reshuffle:
                pc = pc | f"Shuffle{k}" >> beam.Reshuffle()
            if a.sink == "tfrecord":
                pc | f"Write{k}" >> beam.io.WriteToTFRecord(
                    os.path.join(outdir, f"part{k}"), file_name_suffix=".gz")
            else:
                (pc | f"Id{k}" >> beam.Map(lambda r: int(r.split(b",", 1)[0]))
                    | f"List{k}" >> beam.combiners.ToList()
                    | f"Dump{k}" >> beam.Map(
                        lambda ids, k=k: open(f"{ids_out}{k}.json", "w").write(json.dumps(ids))))
    res = p.run()
    res.wait_until_finish()
    counters = {c.key.metric.name: c.committed
                for c in res.metrics().query()["counters"]}
    ids = []
    if a.sink == "tfrecord":
        import gzip
        for f in glob.glob(os.path.join(outdir, "part*")):
            with gzip.open(f, "rb") as fh:
                while True:
                    hdr = fh.read(12)
                    if not hdr:
                        break
                    (ln,) = struct.unpack("<Q", hdr[:8])
                    ids.append(int(fh.read(ln).split(b",", 1)[0]))
                    fh.read(4)
    else:
        for f in glob.glob(ids_out + "*.json"):
            ids += json.load(open(f))
    return ids, counters


def missing_runs(ids, n):
    have = set(ids)
    runs, start = [], None
    for i in range(n + 1):
        if i < n and i not in have:
            start = i if start is None else start
        elif start is not None:
            runs.append((start, i - 1))
            start = None
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--payload", type=int, default=80)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runner", default="FnApiRunner")
    ap.add_argument("--mode", default="multi_threading")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no_side", action="store_true")
    ap.add_argument("--no_partition", action="store_true")
    ap.add_argument("--reshuffle", action="store_true")
    ap.add_argument("--sink", default="count", choices=["count", "tfrecord"])
    ap.add_argument("--flush_ms", type=int, default=None,
                    help="override FnApiRunner's DATA_BUFFER_TIME_LIMIT_MS (default 1000; 0 = "
                         "size-based flushing only, no periodic flusher thread)")
    ap.add_argument("--worker_flush_ms", type=int, default=None)
    a = ap.parse_args()
    if a.flush_ms is not None:
        from apache_beam.runners.portability.fn_api_runner import worker_handlers
        worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = a.flush_ms
    if a.worker_flush_ms is not None:  # SDK-worker side only (runner side keeps its setting)
        from apache_beam.runners.portability.fn_api_runner import worker_handlers
        init = worker_handlers.EmbeddedGrpcWorkerHandler.__init__

        def patched(self, *args, **kw):
            init(self, *args, **kw)
            self._data_buffer_time_limit_ms = a.worker_flush_ms
        worker_handlers.EmbeddedGrpcWorkerHandler.__init__ = patched
    lost_runs = 0
    for r in range(a.repeat):
        with tempfile.TemporaryDirectory() as d:
            t = time.time()
            ids, counters = run_once(a, d)
            runs = missing_runs(ids, a.n)
            dup = len(ids) - len(set(ids))
            lost = a.n - len(set(ids))
            lost_runs += lost > 0
            print(json.dumps({"run": r, "records": len(ids), "lost": lost, "dups": dup,
                              "missing_blocks": runs[:5], **counters, "s": round(time.time() - t, 1)}),
                  flush=True)
    print(f"SUMMARY {vars(a)} runs_with_loss={lost_runs}/{a.repeat}", flush=True)
    sys.exit(1 if lost_runs else 0)


if __name__ == "__main__":
    main()
