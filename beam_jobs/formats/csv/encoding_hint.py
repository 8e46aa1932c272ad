"""What to say about text that is not UTF-8: the flag that reads it, and the encodings its
bytes suggest (charset-normalizer's guesses, of those `--encoding` takes)."""

from __future__ import annotations

from collections.abc import Sequence

from beam_jobs.core.errors import UsageError
from beam_jobs.formats.lines.layout import parse_encoding

__all__ = ["not_utf8"]

_LOOKED_AT = 64 << 10  # bytes of the bad values given to the detector
_GUESSES = 3


# Single- and multi-byte encodings common in files that are not UTF-8, most common first:
# the detector's candidates, and the one named when several read the bytes alike (German
# umlauts read the same in cp1252 and cp1250: cp1252 is named).
_COMMON = (
    "cp1252", "latin_1", "iso8859_15", "cp1250", "cp1251", "cp1253", "cp1254", "cp1256",
    "shift_jis", "euc_jp", "gb18030", "big5", "euc_kr", "koi8_r", "mac_roman",
)  # fmt: skip


def _guesses(values: Sequence[bytes]) -> list[str]:
    from charset_normalizer import from_bytes  # imported on the first bad value only

    blob = b"\n".join(values)[:_LOOKED_AT]
    readings: dict[str, list[str]] = {}  # decoded text -> the encodings that give it
    for match in from_bytes(blob, cp_isolation=list(_COMMON)):
        try:
            name = parse_encoding(match.encoding)
        except UsageError:
            continue  # UTF-16 and the like: --encoding does not read them
        readings.setdefault(blob.decode(name, "replace"), []).append(match.encoding)
    found: list[str] = []
    for text, names in readings.items():
        same = [n for n in _COMMON if _reads(blob, n) == text]  # a more common twin first
        best = parse_encoding((same or names)[0])
        if best not in found:
            found.append(best)
    return found[:_GUESSES]


def _reads(blob: bytes, encoding: str) -> str | None:
    try:
        return blob.decode(encoding)
    except UnicodeDecodeError:
        return None


def _plausible(blob: bytes, encoding: str) -> bool:
    """Whether `encoding` reads the bytes as text at all: every byte decodes, into no control
    character (C0 but tab and line ends, C1: what a wrong single-byte table gives)."""
    text = _reads(blob, encoding)
    return text is not None and not any(
        (ord(c) < 32 and c not in "\t\r\n") or 0x7F <= ord(c) < 0xA0 for c in text
    )


_SHOWN_BYTES = 40  # of the first value with a byte past ASCII, shown decoded by each guess


def not_utf8(values: Sequence[bytes]) -> str:
    """Why values are bad text, and what to do: `not UTF-8 text; pass --encoding ...`, with the
    encodings that read the bytes (charset-normalizer's guesses that decode them all into
    text), each showing what the first such value becomes, so the reader can tell which is
    the file's."""
    blob = b"\n".join(values)[:_LOOKED_AT]
    guesses = [g for g in _guesses(values) if _plausible(blob, g)]
    first = next((v for v in values if any(b > 0x7F for b in v)), b"")
    if not guesses or not first:
        return "not UTF-8 text; pass --encoding with the file's encoding"
    at = next(i for i, b in enumerate(first) if b > 0x7F)
    start = max(0, at - _SHOWN_BYTES // 2)
    part = first[start : start + _SHOWN_BYTES]
    shown = ", ".join(f"--encoding {g} reads {part.decode(g, 'replace')!r}" for g in guesses)
    return f"not UTF-8 text; pass --encoding with the file's encoding ({shown})"
