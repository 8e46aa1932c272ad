"""The writers' Beam metrics, under one namespace (Dataflow's job page shows them)."""

from __future__ import annotations

from typing import Any

from apache_beam.metrics import Metrics

__all__ = ["METRICS_NAMESPACE", "counter"]

METRICS_NAMESPACE = "tfrecord_etl"


def counter(name: str) -> Any:
    """A counter of ours: records_read, records_written, records_dead_lettered, bytes_written,
    input_bytes_read, shards_written."""
    return Metrics.counter(METRICS_NAMESPACE, name)
