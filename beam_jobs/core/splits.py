"""Splits: named shares of the records (`--splits train=80,eval=20`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from beam_jobs.core import flags
from beam_jobs.core.errors import UsageError
from tfdata_reader.manifest import NAME_RULE, is_valid_name

__all__ = ["Split", "accept_splits", "parse_splits"]


@dataclasses.dataclass(frozen=True)
class Split:
    """One split: its name (the prefix of its shards) and its relative weight."""

    name: str
    weight: int


def _checked(splits: Sequence[Split], shown: str) -> tuple[Split, ...]:
    for split in splits:
        if not is_valid_name(split.name) or isinstance(split.weight, bool):
            raise UsageError(
                f"--splits must look like train=80,eval=20 (names of {NAME_RULE}, positive "
                f"integer weights), got {shown}"
            )
    names = [s.name for s in splits]
    if not splits or len(set(names)) != len(names) or any(s.weight < 1 for s in splits):
        raise UsageError(f"--splits needs distinct names and weights of at least 1, got {shown}")
    return tuple(splits)


def parse_splits(text: str) -> tuple[Split, ...]:
    """`train=80,eval=20` -> (Split("train", 80), Split("eval", 20)); raises UsageError."""
    splits = []
    for part in text.split(","):
        name, _, weight = part.strip().partition("=")
        if not is_valid_name(name) or not weight.isdigit():
            raise UsageError(
                f"--splits must look like train=80,eval=20 (names of {NAME_RULE}, positive "
                f"integer weights), got {text!r}"
            )
        splits.append(Split(name, int(weight)))
    return _checked(splits, repr(text))


def accept_splits(value: Any) -> tuple[Split, ...]:
    """Splits given in Python: {"train": 80, "eval": 20}, (name, weight) pairs, or the command
    line's texts (["train=80", "eval=20"])."""
    text = flags.texts_joined(value)
    if text is not None:
        return parse_splits(text)
    pairs = value.items() if isinstance(value, Mapping) else value
    try:
        splits = [s if isinstance(s, Split) else Split(*s) for s in pairs]
        splits = [Split(s.name, flags.whole_number(s.weight)) for s in splits]
    except TypeError:
        raise TypeError(
            f"takes {{name: weight}} or (name, weight) pairs with whole weights, got {value!r}"
        ) from None
    if not all(isinstance(s.name, str) for s in splits):
        raise TypeError(f"takes {{name: weight}} with names as text, got {value!r}")
    return _checked(splits, repr(value))
