"""What the two modes need of an evaluator, copied once at its construction (as torch's
base DataLoader iterator copies the loader's settings in ``__init__``): the modes read
this, never the evaluator back; frozen: nothing changes it after."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .._env import safe_len
from .adaptive import AutoStop
from .timing import Clock


@dataclass(frozen=True)
class EvaluatorConfig:
    """A :class:`~loadeval_nb.LoaderEvaluator`'s checked settings (see its arguments)."""

    dataloader: Any
    clock: Clock
    steps: Optional[int]
    warmup: int
    auto_stop: Optional[AutoStop]
    worker_timing: bool
    num_cached_batches: int
    cache_on: str
    cache_budget_bytes: Optional[int]
    device: Any
    first_batch: Optional[Callable[[Any], None]] = None
    """Called with the first batch of the first epoch (log mode): a pair's check that the
    replay cache will fit, made without starting the loader once more."""

    def expected_steps(self) -> Optional[int]:
        """Steps in one epoch: ``len(loader)`` capped by ``steps`` (None: unknown)."""
        n = safe_len(self.dataloader)
        if self.steps is not None:
            return self.steps if n is None else min(n, self.steps)
        return n
