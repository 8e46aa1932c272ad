"""`python -m beam_jobs ...` runs the command-line interface."""

import sys

from beam_jobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
