"""A `.json` file holding one JSON array of objects, read as JSON lines: one element per line.

The most common JSON file is an array (`[{"a": 1}, {"a": 2}]`, often pretty-printed over many
lines). `ArrayLines` streams it as JSON lines in bounded memory: the outer brackets are
dropped, each comma between top-level elements becomes a newline, and line breaks inside an
element become spaces (JSON allows a raw line break only as whitespace, never inside a
string). The JSON-lines reader then parses the elements as it parses lines, so element `k` is
line `k` of the stream: its dead letters give that position as their `line`.

The scan is vectorized (numpy over 1 MiB steps): quotes escaped by an odd run of backslashes
are told apart, strings are masked, and the nesting depth is a running sum of brackets outside
strings. An array file is read whole by one writer, like a compressed file.
"""

from __future__ import annotations

import io
from typing import Any, BinaryIO

import numpy as np

from beam_jobs.core.errors import DataError

__all__ = ["ArrayLines", "array_lines", "open_as_lines", "starts_an_array"]

_STEP = 1 << 20
_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))
_NEWLINE, _RETURN, _SPACE = ord("\n"), ord("\r"), ord(" ")
_BLANK = np.frombuffer(b" \t\r\n", dtype=np.uint8)
_BOM = b"\xef\xbb\xbf"


def starts_an_array(head: bytes) -> bool:
    """Whether a file whose content starts with `head` is one JSON array (its first byte that
    is no space, a line end or a byte order mark is `[`)."""
    return head.removeprefix(_BOM).lstrip(b" \t\r\n").startswith(b"[")


class _Scanner:
    """The JSON-lines bytes of an array's content, fed step by step (state carried over)."""

    def __init__(self, path: str = "") -> None:
        self.path = path  # the file, for errors
        self.in_string = False
        self.backslashes = 0  # backslashes that ended the last step (inside a string)
        self.depth = 0
        self.ended = False  # the outer array closed
        self.consumed = 0  # bytes fed so far

    def feed(self, data: bytes) -> bytes:
        """The JSON lines of the next bytes of the array.

        Raises:
          DataError: naming the file, for anything but white space after the array's closing
            bracket.
        """
        if not data:
            return b""
        raw = np.frombuffer(data, dtype=np.uint8)
        n = len(raw)
        positions = np.arange(n)
        backslash = raw == _BACKSLASH
        # The run of backslashes just before each byte (the run carried in from the last step
        # counts for the bytes at the start).
        last_other = np.maximum.accumulate(np.where(backslash, -1, positions))
        run_before = np.empty(n, dtype=np.int64)
        run_before[0] = self.backslashes
        run_before[1:] = positions[:-1] - last_other[:-1]
        first_other = np.flatnonzero(~backslash)
        run_before[1 : (first_other[0] + 1 if len(first_other) else n)] += self.backslashes
        quotes = np.flatnonzero((raw == _QUOTE) & (run_before % 2 == 0))
        # Inside a string: between an opening and a closing quote (the quotes themselves
        # count as inside, which keeps them out of the structure below).
        toggles = np.zeros(n, dtype=np.int64)
        toggles[quotes] = 1
        parity = (np.cumsum(toggles) + self.in_string) % 2
        inside = (parity == 1) | (toggles == 1)
        outside = ~inside
        step = np.zeros(n, dtype=np.int64)
        step[outside & np.isin(raw, _OPEN)] = 1
        step[outside & np.isin(raw, _CLOSE)] = -1
        depth_after = self.depth + np.cumsum(step)
        depth_before = depth_after - step
        out = raw.copy()
        out[outside & ((raw == _NEWLINE) | (raw == _RETURN))] = _SPACE
        separators = outside & (raw == _COMMA) & (depth_before == 1)
        out[separators] = _NEWLINE
        opening = (step == 1) & (depth_before == 0)
        closing = (step == -1) & (depth_after == 0)
        out[closing] = _NEWLINE  # the last element's line end
        ends = np.flatnonzero(closing)
        after = (ends[0] + 1) if len(ends) else (0 if self.ended else n)
        extra = np.flatnonzero(~np.isin(raw[after:], _BLANK))
        if len(extra):
            at = self.consumed + after + int(extra[0])
            raise DataError(
                f"{self.path}: text after the JSON array's closing ']' (at byte {at:,})"
            )
        self.consumed += n
        keep = ~opening & ~((depth_before == 0) & (depth_after == 0) & (out == _SPACE))
        self.in_string = bool(parity[-1])
        tail = n - 1 - (last_other[-1] if last_other[-1] >= 0 else -1)
        self.backslashes = int(tail + (self.backslashes if tail == n else 0))
        self.depth = int(depth_after[-1])
        self.ended = self.ended or bool(closing.any())
        return out[keep].tobytes()


def array_lines(content: bytes, path: str = "") -> bytes:
    """The JSON lines of an array's content (its head: the last line may be incomplete)."""
    return _Scanner(path).feed(content.removeprefix(_BOM))


def open_as_lines(stream: BinaryIO, path: str) -> BinaryIO:
    """A JSON array's content stream (of the file `path`) as a buffered stream of its JSON
    lines."""
    return io.BufferedReader(ArrayLines(stream, path), buffer_size=_STEP)


class ArrayLines(io.RawIOBase):
    """A JSON array file's content (a binary stream), read as JSON lines (see the module doc).
    It is read from its start, forwards only."""

    def __init__(self, stream: BinaryIO, path: str) -> None:
        self._stream, self._path = stream, path
        self._scanner = _Scanner(path)
        self._pending = b""
        self._position = 0
        self._first = True

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True  # to where it is: the line readers seek to their start

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET or offset != self._position:
            raise io.UnsupportedOperation("a JSON array is read forwards, from its start")
        return self._position

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            data = self._stream.read(_STEP)
            if not data:
                if not self._scanner.ended:
                    raise DataError(
                        f"{self._path}: the JSON array does not close (no ']' at its end): is "
                        "the file cut short?"
                    )
                return 0
            if self._first:
                data, self._first = data.removeprefix(_BOM), False
            self._pending = self._scanner.feed(data)
        taken = self._pending[: len(buffer)]
        self._pending = self._pending[len(taken) :]
        buffer[: len(taken)] = taken
        self._position += len(taken)
        return len(taken)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()
