"""tfrecord-etl: raw files to size-targeted TFRecord shards with Beam, read back with tf.data."""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
# The version is defined once, in beam_jobs/core/version.py (recorded in every manifest).
VERSION = re.search(
    r'^__version__ = "([^"]+)"', (HERE / "beam_jobs" / "core" / "version.py").read_text(), re.M
).group(1)

setup(
    name="tfrecord-etl",
    version=VERSION,
    description="Convert raw files into size-targeted TFRecord shards with Apache Beam, "
    "and read them with tf.data under tf.distribute.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(
        include=["beam_jobs", "beam_jobs.*", "tfdata_reader", "tfdata_reader.*"]
    ),
    install_requires=[
        "apache-beam[gcp]==2.77.0",
        "tensorflow>=2.21,<2.22",
        "tfx-bsl==1.21.0",
        "google-cloud-storage>=3.17,<3.18",
        "pyarrow",
        "numpy",
        "google-crc32c",
        "pandas",
        "pillow",
        "zstandard",
        "orjson",  # dead-letter lines (beam_jobs/sink/dead_letter.py) and split hashes
        "isal",  # ISA-L's DEFLATE for GZIP shards (beam_jobs/codec/deflate.py; zlib without it)
        "tqdm",  # the live progress bar on a terminal (beam_jobs/sink/progress.py)
    ],
    # dask: `--runner DaskRunner` (beam_jobs/job/on_dask.py). dev: the tests, which also run on a
    # local Dask cluster; gcp-storage-emulator and cryptography are the local Cloud Storage the
    # gs:// tests run against; tensorflow-datasets loads converted folders in the tests.
    extras_require={
        "dask": ["dask", "distributed"],
        "dev": [
            "pytest",
            "pytest-timeout",  # a hung test fails, naming itself (pytest.ini: timeout)
            "hypothesis",
            "ruff",
            "mypy",
            "gcp-storage-emulator",
            "cryptography",
            "dask",
            "distributed",
            "tensorflow-datasets",
        ],
    },
    entry_points={"console_scripts": ["tfrecord-etl=beam_jobs.cli:main"]},
)
