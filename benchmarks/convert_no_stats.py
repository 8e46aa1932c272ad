"""`tfrecord-etl convert` with the writers' statistics turned off (an empty `statistics.pb`).
For `make bench` only, to measure what computing statistics costs.

    python benchmarks/convert_no_stats.py convert --input ... --output ...
"""

from __future__ import annotations

import sys

from beam_jobs import cli
from beam_jobs.job.collector import long_lived_imports

with long_lived_imports():  # as the CLI imports Beam (else this run would start slower)
    from beam_jobs.sink import shard_writer

if __name__ == "__main__":
    # The default local runner runs the writers in this process, so the patch reaches them.
    shard_writer.update_all = lambda *args, **kwargs: None
    sys.exit(cli.main(sys.argv[1:]))
