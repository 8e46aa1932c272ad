"""How deeply each JSON line nests, from its bytes alone, before any parser sees it.

pyarrow's JSON parser recurses in C++ and crashes the process on a line nested some 100,000
levels deep, and Python code that walks a parsed value recurses too; so depth is measured on the
bytes, with numpy: brackets count unless they are inside a string (a quote is a string's edge
unless an odd run of backslashes precedes it). Most lines are too short, or have too few
brackets, to come near a limit, and are not looked at closely.
"""

from __future__ import annotations

import numpy as np

from beam_jobs.formats.lines.chunks import line_offsets

__all__ = ["deep_lines", "nesting_depth"]

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN, _CLOSE = (ord("{"), ord("[")), (ord("}"), ord("]"))


def _either(data: np.ndarray, pair: tuple[int, int]) -> np.ndarray:
    return (data == pair[0]) | (data == pair[1])


def nesting_depth(line: bytes | np.ndarray) -> int:
    """The deepest nesting of objects and arrays in one line (`{"a": 1}` is 1)."""
    data = np.frombuffer(line, dtype=np.uint8) if isinstance(line, bytes) else line
    if not len(data):
        return 0
    index = np.arange(len(data))
    last_plain = np.maximum.accumulate(np.where(data == _BACKSLASH, -1, index))
    quotes = np.flatnonzero(data == _QUOTE)
    before = np.maximum(quotes - 1, 0)
    backslashes = np.where(quotes > 0, (quotes - 1) - last_plain[before], 0)
    edges = np.zeros(len(data), dtype=np.int8)
    edges[quotes[backslashes % 2 == 0]] = 1
    outside = np.cumsum(edges) % 2 == 0  # the closing quote itself is outside; no bracket
    step = _either(data, _OPEN).astype(np.int64) - _either(data, _CLOSE)
    return int(max(0, np.cumsum(np.where(outside, step, 0)).max()))


def deep_lines(
    chunk: bytes, limit: int, lines: tuple[np.ndarray, np.ndarray] | None = None
) -> list[int]:
    """The indexes of the lines of a chunk nested `limit` or more levels deep (`lines`: their
    offsets, when known)."""
    starts, ends = lines if lines is not None else line_offsets(chunk)
    # A line that deep is at least twice as long, and has as many brackets: few lines are.
    candidates = np.flatnonzero(ends - starts >= 2 * limit).tolist()
    found = []
    for i in candidates:
        line = chunk[starts[i] : ends[i]]
        if line.count(b"{") + line.count(b"[") >= limit and nesting_depth(line) >= limit:
            found.append(i)
    return found
