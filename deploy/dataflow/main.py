"""Flex Template entry point: `tfrecord-etl convert` with the template's parameters.

The launcher submits the job and returns (`--wait=false`); Dataflow runs it. Parameters arrive
as `--name=value` flags, exactly the CLI's (see metadata.json).
"""

import sys

from beam_jobs.cli import main

if __name__ == "__main__":
    sys.exit(main(["convert", "--wait=false", *sys.argv[1:]]))
