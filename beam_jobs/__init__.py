"""tfrecord-etl's Beam side: convert raw files into size-targeted TFRecord shards."""

from beam_jobs.version import __version__

__all__ = ["__version__"]
