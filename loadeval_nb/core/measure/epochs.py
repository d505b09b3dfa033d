"""A pair measured on the training loop's own epochs: for a loader whose epoch is too short
for blocks within it (a few dozen batches with workers: the cache fill and each change of
side's drained queue leave no steady steps), the loop's epochs are the blocks. Epoch by
epoch, one process serves the real loader (log mode) or a replay of cached batches of the
same length (replay mode) in A B B A order, so that a drift of the machine lands on both
sides, as the interleaved pass's blocks do within one epoch; the two run logs hold an
epoch per block, and the verdict pairs them (its interval: the blocks' t-interval united
with the steps' bootstrap).

Each epoch hands the loop exactly the loader's ``len()`` batches: the loop's own epoch,
its learning-rate schedule and its progress counters are kept (an ideal epoch trains on
replayed batches, as the ideal run always does).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Optional

from ..record.run import DEFAULT_STEPS, EPOCH_PAIR
from .evaluator import LoaderEvaluator

ORDER = ("real", "ideal", "ideal", "real")
"""The sides of four epochs in turn (A B B A: a drift linear in time lands on both)."""
ORDER_WORDS = ("A", "B", "B", "A")
EPOCHS = 8
"""Epochs in the schedule: 4 a side, the fewest a t-interval of their speedups is taken
from with some confidence (3 degrees of freedom)."""
MIN_EPOCHS = 4
"""Fewer epochs measured than this (the loop ended first): too few to pair, 2 a side."""


def pair_epochs(steps: Any, epoch_len: int) -> int:
    """Epochs in the schedule for ``steps`` steps a side over an epoch of ``epoch_len``
    batches: whole epochs a side holding at least ``steps`` steps, never fewer than
    :data:`EPOCHS` in all (``--steps N`` measures more of the loop's epochs, as the advice
    to narrow an interval asks). The default (:data:`DEFAULT_STEPS`), ``"auto"`` or
    anything else: :data:`EPOCHS`."""
    if (
        isinstance(steps, bool)
        or not isinstance(steps, int)
        or steps <= 0
        or steps == DEFAULT_STEPS
        or epoch_len <= 0
    ):
        return EPOCHS
    return max(EPOCHS, 2 * math.ceil(steps / epoch_len))


class EpochPair:
    """Real and ideal epochs of one loader in A B B A order (see the module's notes).
    ``real`` and ``ideal`` are the two sides' wrappers (log and replay mode) over the same
    loader, each measuring whole epochs; each ``iter()`` is the loop's next epoch."""

    mode = "pair"

    def __init__(self, real: LoaderEvaluator, ideal: LoaderEvaluator, epochs: int = EPOCHS) -> None:
        self.real, self.ideal = real, ideal
        self.epochs = epochs
        for side in (real, ideal):  # the logs say their blocks are the loop's epochs
            side.log_settings[EPOCH_PAIR] = {"epochs": epochs, "order": "".join(ORDER_WORDS)}
        self.started = 0
        """Epochs handed out so far."""
        self.completed = {"real": 0, "ideal": 0}
        """Each side's epochs that ran to their end."""
        self.handed = 0
        """Batches handed to the loop so far, over every epoch."""
        self._open: Optional[str] = None

    def side_of(self, k: int) -> str:
        """The side of epoch ``k`` (from 0)."""
        return ORDER[k % len(ORDER)]

    @property
    def block_now(self) -> Optional[tuple[str, int]]:
        """(side, its block from 1) of the epoch being served; None between epochs."""
        if self._open is None:
            return None
        k = self.started - 1
        return self._open, sum(1 for j in range(k + 1) if self.side_of(j) == self._open)

    @property
    def last(self) -> bool:
        """The epoch being served (or last served) completes the schedule."""
        return self.started >= self.epochs

    @property
    def enough(self) -> bool:
        """At least :data:`MIN_EPOCHS` epochs ran to their end, half of them each side's."""
        return min(self.completed.values()) * 2 >= MIN_EPOCHS

    def __len__(self) -> int:
        return len(self.real)

    def __iter__(self) -> Iterator[Any]:
        side = self.side_of(self.started)
        self.started += 1
        self._open = side
        return self._epoch(side, iter(self.real if side == "real" else self.ideal))

    def _epoch(self, side: str, it: Iterator[Any]) -> Iterator[Any]:
        try:
            for batch in it:
                self.handed += 1
                yield batch
        finally:
            self._open = None
        self.completed[side] += 1

    def close(self) -> None:
        try:
            self.real.close()
        finally:
            self.ideal.close()
