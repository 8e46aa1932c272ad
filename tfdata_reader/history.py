"""`WeightHistory`: the weights an epoch of several sources was read with, from each step on.

Pure Python (no TensorFlow): a `ReadPosition` keeps it as JSON in a variable (a checkpoint
saves it), and the epoch's plan reads it (`streams.ShuffledReads.segments`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence

__all__ = ["WeightHistory", "Weights", "going_on"]

Weights = tuple[float, ...] | None


@dataclasses.dataclass(frozen=True)
class WeightHistory:
    """The weights an epoch of several sources was read with: from each step on.

    Attributes:
      epoch: the epoch.
      sources: the sources, as named (their datasets), in order.
      segments: (first step, weights) in step order, the first at step 0 (weights None: every
        record once, a list of datasets).
    """

    epoch: int
    sources: tuple[str, ...]
    segments: tuple[tuple[int, Weights], ...]

    @classmethod
    def starting(cls, epoch: int, sources: Sequence[str], weights: Weights) -> WeightHistory:
        return cls(epoch, tuple(sources), ((0, weights),))

    def reading(
        self, epoch: int, step: int, sources: Sequence[str], weights: Weights
    ) -> WeightHistory:
        """The history once a dataset of `sources` with `weights` reads on from (epoch, step):
        another epoch, or step 0, starts anew; the same epoch goes on, the new weights from
        `step` on (when they differ).

        Raises:
          ValueError: for other sources within the epoch (its order would be another).
        """
        if epoch != self.epoch or step == 0:
            return WeightHistory.starting(epoch, sources, weights)
        if tuple(sources) != self.sources:
            raise ValueError(
                f"the position is at step {step} of epoch {epoch}, read from other datasets "
                f"({len(self.sources)} sources: {', '.join(self.sources[:3])}"
                f"{', ...' if len(self.sources) > 3 else ''}); an epoch is read from one set of "
                "datasets: finish it with those (weights may change), or start the next epoch "
                "(a position at step 0)"
            )
        kept = tuple((s, w) for s, w in self.segments if s <= step)
        if kept[-1][0] == step and len(kept) > 1:  # changed again at the same step
            kept = kept[:-1]
        if _same(kept[-1][1], weights):  # in force already (the same shares)
            return dataclasses.replace(self, segments=kept)
        return dataclasses.replace(self, segments=(*kept, (step, weights)))

    def next_epoch(self) -> WeightHistory:
        """The next epoch's: read with the weights this one ended with."""
        return WeightHistory.starting(self.epoch + 1, self.sources, self.segments[-1][1])

    def to_json(self) -> str:
        segments = [[s, None if w is None else list(w)] for s, w in self.segments]
        return json.dumps(
            {"epoch": self.epoch, "sources": list(self.sources), "segments": segments}
        )

    @classmethod
    def from_json(cls, text: str) -> WeightHistory | None:
        if not text:
            return None
        state = json.loads(text)
        segments = tuple(
            (int(s), None if w is None else tuple(float(x) for x in w))
            for s, w in state["segments"]
        )
        return cls(int(state["epoch"]), tuple(state["sources"]), segments)


def going_on(
    before: str, epoch: int, step: int, sources: Sequence[str], weights: Weights
) -> WeightHistory:
    """The history (`before`: its JSON, "" for none) once a dataset of `sources` with
    `weights` reads on from (epoch, step): `WeightHistory.reading`, or a new one.

    Raises:
      ValueError: for other sources within the epoch.
    """
    found = WeightHistory.from_json(before)
    if found is None:
        return WeightHistory.starting(epoch, sources, weights)
    return found.reading(epoch, step, sources, weights)


def _same(a: Weights, b: Weights) -> bool:
    """Whether two weightings share alike (weights in proportion: 2 x the weights is the
    same)."""
    if a is None or b is None:
        return a is b
    if len(a) != len(b):
        return False
    sa = [x / max(a) for x in a]  # (scaled first: weights near the largest float)
    sb = [y / max(b) for y in b]
    ta, tb = sum(sa), sum(sb)
    return all(
        math.isclose(x / ta, y / tb, rel_tol=1e-12, abs_tol=1e-15)
        for x, y in zip(sa, sb, strict=True)
    )
