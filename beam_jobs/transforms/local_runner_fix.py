"""A fix for Beam 2.77's local runner, which silently drops elements in multi_threading mode.

The local FnApiRunner's in-process (multi_threading) workers buffer each output stream and a
background thread flushes it every 1,000 ms (`TimeBasedBufferingClosableOutputStream` in
`apache_beam/runners/worker/data_plane.py`) with `get()` then `_clear()`, while the bundle's
thread keeps writing into the buffer without the lock: elements written in between vanish, and
the job still succeeds (docs/beam-local-runner-data-loss.md has the reproduction and the cause).
Remote SDK harnesses (Dataflow, portable Flink and Spark, the local runner's worker processes)
do not flush on a timer unless asked to; the in-process workers always do, because their
environment turns a configured 0 back into 1,000.

`apply()` gives the in-process workers what remote harnesses have: no timer, buffers flushed
when they fill and when a bundle ends. It changes one attribute that Beam's own constructor
sets, and applies only to the Beam version it was written and tested for; on any other version
it does nothing and says so, and the launcher then runs local jobs in worker processes.
"""

from __future__ import annotations

import logging

__all__ = ["FIXED_BEAM_VERSION", "apply", "is_applied"]

FIXED_BEAM_VERSION = "2.77.0"
_MARK = "_tfrecord_etl_no_timed_flush"
_log = logging.getLogger(__name__)


def is_applied() -> bool:
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    return bool(getattr(worker_handlers.EmbeddedGrpcWorkerHandler, _MARK, False))


def apply() -> bool:
    """Turns off the timed flush of in-process workers; True when the fix is in place.

    Idempotent. On a Beam version other than `FIXED_BEAM_VERSION` it changes nothing and
    returns False: the fix reaches into one private attribute, which another version may not
    have or may use differently.
    """
    import apache_beam
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    if is_applied():
        return True
    if apache_beam.__version__ != FIXED_BEAM_VERSION:
        _log.warning(
            "Beam %s is not %s, for which the fix of the local runner's multi_threading data "
            "loss was written; it is not applied",
            apache_beam.__version__,
            FIXED_BEAM_VERSION,
        )
        return False
    handler = worker_handlers.EmbeddedGrpcWorkerHandler
    original_init = handler.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self._data_buffer_time_limit_ms = 0  # size-based flushing only, as remote harnesses

    handler.__init__ = __init__  # type: ignore[method-assign]
    setattr(handler, _MARK, True)
    return True
