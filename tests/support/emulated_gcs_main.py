"""`tfrecord-etl` against the storage emulator: the CLI, minus Beam's credential lookup.

Without credentials, Beam retries Google's default-credentials lookup for about 20 s before it
connects anonymously; with STORAGE_EMULATOR_HOST set the storage client is anonymous anyway, so
the lookup is marked done (with no credentials) before the CLI runs.
"""

import sys

from apache_beam.internal.gcp import auth

from beam_jobs.cli import main

if __name__ == "__main__":
    auth._Credentials._credentials_init = True
    auth._Credentials._credentials = None
    sys.exit(main(sys.argv[1:]))
