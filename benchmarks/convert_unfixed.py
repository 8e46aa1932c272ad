"""`tfrecord-etl convert` as it ran before the local-runner fix: worker threads with Beam's timed
flush (which can drop elements; see docs/beam-local-runner-data-loss.md). For `make bench` only,
to measure what the fix costs against that default.

    python benchmarks/convert_unfixed.py convert --input ... --output ...
"""

from __future__ import annotations

import sys

from beam_jobs import cli
from beam_jobs.job import runner

if __name__ == "__main__":
    runner.local_runner_fix.apply = lambda: False  # as before the fix: threads, timed flush
    sys.exit(cli.main([*sys.argv[1:], "--direct_running_mode=multi_threading"]))
