"""The cyclic garbage collector around the launcher's imports.

Importing Beam (and, through it, Cloud Storage, pandas and protobuf modules) makes about a
million objects that live as long as the process. While they are made, every full collection
walks all that exist so far; and once made, every later full collection walks them again, which
a conversion with many small objects (a dirty file's bad rows) pays over and over. The
collector is paused for the imports, and what they made is frozen: set apart from collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["long_lived_imports"]


@contextlib.contextmanager
def long_lived_imports() -> Iterator[None]:
    """Runs the block (imports) with the collector paused, then freezes every object so far."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
