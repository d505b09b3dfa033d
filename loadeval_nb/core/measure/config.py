"""What the two modes need of an evaluator, copied once at its construction (as torch's
base DataLoader iterator copies the loader's settings in ``__init__``): the modes read
this, never the evaluator back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .._env import safe_len
from .adaptive import AutoStop
from .timing import Clock


@dataclass
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
    copies_on: Optional[tuple[str, Any]] = None
    """Host-to-device copy timing: None times copies to CUDA when this process uses CUDA;
    tests set ("meta", an event class on a fake clock)."""

    first_batch: Optional[Callable[[Any], None]] = None
    """Called with the first batch of the first epoch (log mode): a pair's check that the
    replay cache will fit, made without starting the loader once more."""

    def expected_steps(self) -> Optional[int]:
        """Steps in one epoch: ``len(loader)`` capped by ``steps`` (None: unknown)."""
        n = safe_len(self.dataloader)
        if self.steps is not None:
            return self.steps if n is None else min(n, self.steps)
        return n
