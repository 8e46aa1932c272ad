"""Human byte sizes: `256MiB`, `1GB`, `1.5GiB`, `4096`."""

from __future__ import annotations

import re

__all__ = ["count_of", "format_size", "parse_size"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Parses a byte size: KB, MB, GB are powers of 1000; KiB, MiB, GiB powers of 1024.

    Raises:
      ValueError: naming the bad text and the accepted forms.
    """
    if isinstance(text, int):
        return text
    match = _SIZE_RE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(
            f"cannot read {text!r} as a size; use a number of bytes with an optional unit, "
            "e.g. 4096, 100MB, 256MiB, 1GiB"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(num_bytes: float) -> str:
    """Formats bytes with a binary unit and three significant digits, e.g. `1.5 MiB`."""
    value = float(num_bytes)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            return f"{_three_digits(value)} {unit}"
    raise AssertionError("unreachable")


def _three_digits(value: float) -> str:
    """Three significant digits, without the exponent `.3g` gives from 999.5 up (`1e+03`)."""
    return f"{value:.0f}" if abs(value) >= 999.5 else f"{value:.3g}"


def count_of(n: int, noun: str) -> str:
    """`1 shard`, `2 shards`: a count with its noun in the right number."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
