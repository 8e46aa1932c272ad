"""How CSV text reads as a number: the patterns inference types columns by (`inference`), the
writers' parse takes (`ranges`), and a missing-value marker is checked against (`markers`).
They are written for RE2 (pyarrow's `match_substring_regex`) and Python's `re` alike: spaces
around a value are allowed, as the writers trim them.
"""

from __future__ import annotations

import re

__all__ = ["BOOLEAN", "INTEGER", "NUMBER", "reads_as"]

INTEGER = r"^\s*[+-]?\d+\s*$"
NUMBER = r"(?i)^\s*[+-]?((\d+\.?\d*|\.\d+)(e[+-]?\d+)?|inf|infinity|nan)\s*$"
BOOLEAN = r"(?i)^\s*(true|false)\s*$"

# What each number dtype reads (an int64 column takes true/false as 1/0).
_READS = {"int64": (INTEGER, BOOLEAN), "float32": (NUMBER,)}


def reads_as(text: str, dtype: str) -> bool:
    """Whether `text` reads as a value of `dtype` (`-999` of int64, `NaN` of float32); never
    for bytes."""
    return any(re.search(pattern, text) for pattern in _READS.get(dtype, ()))
