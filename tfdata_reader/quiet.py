"""TensorFlow imported without its C++ start-up notices, for command-line tools.

TensorFlow 2.21 writes its start-up notices (oneDNN, CUDA drivers not found, `cuInit` failed)
from C++ through absl before absl's logging is set up, straight to file descriptor 2:
`TF_CPP_MIN_LOG_LEVEL` does not reach them. A command that prints a one-line answer (`diff`)
would print six lines of them first. So the import (and the device probe that prints the CUDA
line) runs with descriptor 2 pointed at /dev/null; Python's own errors still reach stderr, as
they are raised, not printed, while it is redirected.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["import_tensorflow_quietly", "native_stderr_silenced"]


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 goes to /dev/null inside the block (Python's sys.stderr is flushed
    first, so nothing written before is lost)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow and probes its devices without the start-up notices (a no-op once
    TensorFlow is imported)."""
    if "tensorflow" in sys.modules:
        return
    with native_stderr_silenced():
        import tensorflow as tf

        tf.config.list_physical_devices()  # the CUDA probe, which prints when it fails
