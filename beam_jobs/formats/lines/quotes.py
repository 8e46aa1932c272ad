"""The quote state of delimited lines (CSV), as pyarrow's CSV lexer follows it, and where
records start by it; shared by the CSV reader and the counts before each cut.

A range [start, end) of a file owns the records that *start* inside it. A record starts at
offset 0 and after every newline that is not inside a quoted field. pyarrow (like Python's
`csv` module) opens a quoted field only with a quote at the *start* of a field; a quote inside
an unquoted field (`TV 55" screen`) is a literal character, and after a quoted field closes
the rest of the field is read unquoted. So the lexer's state depends on more than the parity
of the quotes before a point. It is tracked over *runs* of consecutive quote bytes:

- outside quotes, a run at the start of a field (after a delimiter, a line end or the file's
  start) of odd length opens a quoted field (one quote, or three: opened, then an escaped quote); a
  run elsewhere is literal text;
- inside quotes, a run of odd length closes the field (the last quote closes; the pairs before
  it are escaped quotes), one of even length is escaped quotes.

Each run is therefore one of three functions of the state: *toggle* (odd, at a field start),
*reset* to outside (odd, not at a field start), or identity (even), and the state after any
stretch of bytes is computed for all runs at once with numpy. A stretch's effect on the state
is a `QuoteEffect` (the same three kinds, composed), so stretches between cut points are
summarized in parallel and composed in order, and a writer knows the exact state at its cut.
The field delimiter is `,` unless given (`--delimiter`). Where CSV records start in a file
follows from this (`formats.csv.record_starts`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = [
    "FILE_START",
    "NEWLINE",
    "QUOTE",
    "QuoteEffect",
    "QuoteScanner",
    "record_starts",
]

QUOTE = ord('"')
NEWLINE = ord("\n")
_LINE_ENDS = (NEWLINE, ord("\r"))
FILE_START = -1  # the "byte before" offset 0: a field starts there


@dataclasses.dataclass(frozen=True)
class QuoteEffect:
    """What a stretch of bytes does to the in-quotes state: `resets` (it ends outside quotes
    whatever the state before, flipped `flips` times after the last reset) or not (the state
    before, flipped `flips` times)."""

    resets: bool = False
    flips: int = 0

    def apply(self, in_quotes: bool) -> bool:
        base = False if self.resets else in_quotes
        return base != bool(self.flips % 2)

    def then(self, later: QuoteEffect) -> QuoteEffect:
        """This stretch followed by `later`."""
        if later.resets:
            return later
        return QuoteEffect(self.resets, (self.flips + later.flips) % 2)


def _runs(arr: np.ndarray, previous: int, delimiter: int) -> tuple[np.ndarray, np.ndarray]:
    """Start offsets of the quote runs in `arr`, and each run's kind: 0 identity, 1 toggle,
    2 reset. `previous` is the byte before `arr[0]` (FILE_START at the file's start); a field
    starts after `delimiter`, a line end, or at the file's start."""
    quotes = np.flatnonzero(arr == QUOTE)
    if quotes.size == 0:
        return quotes, quotes
    breaks = np.flatnonzero(np.diff(quotes) != 1) + 1
    starts = quotes[np.concatenate(([0], breaks))]
    ends = quotes[np.concatenate((breaks - 1, [quotes.size - 1]))] + 1
    before = arr[np.maximum(starts - 1, 0)].astype(np.int16)
    if starts[0] == 0:
        before[0] = previous
    # Compared one by one: np.isin's set-up cost more than the scan of a small block.
    field_start = (before == delimiter) | (before == FILE_START)
    for end in _LINE_ENDS:
        field_start |= before == end
    odd = (ends - starts) % 2 == 1
    kinds = np.where(odd, np.where(field_start, 1, 2), 0)
    return starts, kinds


def _states_after(kinds: np.ndarray, in_quotes: bool) -> np.ndarray:
    """The in-quotes state after each run, from the state before the first."""
    toggles = np.cumsum(kinds == 1)
    index = np.arange(kinds.size)
    last_reset = np.maximum.accumulate(np.where(kinds == 2, index, -1))
    toggles_before_reset = np.where(last_reset >= 0, toggles[np.maximum(last_reset, 0)], 0)
    base = np.where(last_reset >= 0, False, in_quotes)
    return base ^ ((toggles - toggles_before_reset) % 2 == 1)


class QuoteScanner:
    """Follows the in-quotes state through consecutive blocks of a file and finds the records
    that start in them.

    A quote run that ends a block is held back until the next block (or `finish`), as its
    length decides what it does.

    Args:
      in_quotes: the state before the first block.
      previous: the byte before the first block (FILE_START at the file's start). When it is
        a quote, the quotes the first block begins with continue a run that started earlier,
        whose effect `in_quotes` already includes, so they are skipped.
    """

    def __init__(
        self, in_quotes: bool = False, previous: int = FILE_START, delimiter: str = ","
    ) -> None:
        self.in_quotes = in_quotes
        self._delimiter = ord(delimiter)
        self.effect = QuoteEffect()
        self._previous = previous
        self._skip_leading_quotes = previous == QUOTE
        self._carry = b""

    def feed(self, block: bytes, offset: int) -> np.ndarray:
        """File offsets of the records that start right after a newline in this block
        (`offset` is where `block` begins in the file)."""
        if self._skip_leading_quotes:
            stripped = block.lstrip(b'"')
            offset += len(block) - len(stripped)
            block = stripped
            if not block:
                return np.zeros(0, np.int64)
            self._skip_leading_quotes = False
        if self._carry:
            offset -= len(self._carry)
            block = self._carry + block
            self._carry = b""
        held = len(block) - len(block.rstrip(b'"'))
        if held and held < len(block):
            self._carry = block[-held:]
            block = block[:-held]
        elif held:  # only quotes: wait for the byte after them
            self._carry = block
            return np.zeros(0, np.int64)
        return self._scan(block, offset)

    def finish(self) -> None:
        """Ends the stream (at the file's end, or past a cut's run): applies a held-back run."""
        if self._carry:
            block, self._carry = self._carry, b""
            self._scan(block, 0)

    def _scan(self, block: bytes, offset: int) -> np.ndarray:
        arr = np.frombuffer(block, dtype=np.uint8)
        starts, kinds = _runs(arr, self._previous, self._delimiter)
        newlines = np.flatnonzero(arr == NEWLINE)
        if starts.size:
            after = _states_after(kinds, self.in_quotes)
            which = np.searchsorted(starts, newlines) - 1
            quoted = np.where(which >= 0, after[np.maximum(which, 0)], self.in_quotes)
            self.in_quotes = bool(after[-1])
            self.effect = self.effect.then(_effect_of(kinds))
        else:
            quoted = np.full(newlines.size, self.in_quotes)
        self._previous = int(arr[-1]) if arr.size else self._previous
        return newlines[~quoted].astype(np.int64) + offset + 1


def _effect_of(kinds: np.ndarray) -> QuoteEffect:
    resets = np.flatnonzero(kinds == 2)
    if resets.size:
        return QuoteEffect(True, int((kinds[resets[-1] :] == 1).sum()) % 2)
    return QuoteEffect(False, int((kinds == 1).sum()) % 2)


def record_starts(
    block: bytes, in_quotes: bool = False, previous: int = FILE_START, delimiter: str = ","
) -> np.ndarray:
    """Offsets within `block` just past every newline that ends a record (the block is taken
    as the whole stream: a trailing quote run is resolved as at the file's end)."""
    scanner = QuoteScanner(in_quotes, previous, delimiter)
    found = scanner.feed(block, 0)
    scanner.finish()
    return found
