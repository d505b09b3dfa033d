"""Adaptive stop (``--steps auto``): end a run once its step time is known well enough.

A run stops when the 95 % confidence interval of its **median** step time is within
±5 % of the median (distribution-free, from order statistics) *and* so is the
interval of its **mean** (non-overlapping batch means, which respect the
autocorrelation of an input-bound loop that stalls every W steps; the verdict's
throughput is a mean, and a loop with rare long stalls has a steady median but a
wandering mean). Between ``min_steps`` steady steps and ``max_steps`` steps in all.

The check runs once per chunk of steps (about a tenth of the steps so far, at least
``check_every``), never per step: the per-step path stays C-level iterators
(``chain.from_iterable`` over ``islice`` chunks). Each check sorts the steady steps
so far, so checks grow rarer as the run grows: a run that never converges makes
a few dozen of them (their cost is measured in docs/adaptive.md), inside the steps
they interrupt.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from itertools import islice
from typing import Any, Callable, Optional

from .._errors import check_int
from .._stats import t975
from ..errors import LoadEvalError

_Z = {0.90: 1.6449, 0.95: 1.96, 0.99: 2.5758}


def median_ci(xs: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(low, median, high): the distribution-free interval of the median from order
    statistics (normal approximation of the binomial ranks). Needs at least 1 value."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise LoadEvalError("median_ci needs at least one value.")
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    if level not in _Z:
        raise LoadEvalError(f"level must be one of {', '.join(map(str, _Z))}, not {level!r}.")
    z = _Z[level]
    half = z * math.sqrt(n) / 2
    lo_rank = max(1, int(math.floor(n / 2 - half)))
    hi_rank = min(n, int(math.ceil(n / 2 + half)) + 1)
    return s[lo_rank - 1], med, s[hi_rank - 1]


def mean_ci(xs: Sequence[float], n_batches: int = 10) -> tuple[float, float, float]:
    """(low, mean, high): 95 % interval of the mean by non-overlapping batch means
    (``n_batches`` consecutive blocks), so autocorrelated steps do not look too sure."""
    n = len(xs)
    if n == 0:
        raise LoadEvalError("mean_ci needs at least one value.")
    mean = sum(xs) / n
    b = n // n_batches
    if b < 1:
        return -math.inf, mean, math.inf
    means = [sum(xs[i * b : (i + 1) * b]) / b for i in range(n_batches)]
    mm = sum(means) / n_batches
    var = sum((m - mm) ** 2 for m in means) / (n_batches - 1)
    half = t975(n_batches - 1) * math.sqrt(var / n_batches)
    return mean - half, mean, mean + half


@dataclass(frozen=True)
class AutoStop:
    """When to stop a run (``LoaderEvaluator(..., steps="auto")`` uses the defaults).

    Args:
        rel: stop once both intervals are within ± this fraction of their centre.
        min_steps: steady (post warm-up) steps before the first check.
        max_steps: stop here whatever the intervals say (counts warm-up steps).
        check_every: smallest number of steps between two checks.
        until: for a pair measured in blocks, what settles it besides each side's
            precision: a function of the real and the ideal runs so far, true when the
            pass may stop (``run_pair`` and the script runner give the verdict's: the
            blocks' interval decides its label and is within ``4 * rel``); checked once
            per A B B A cycle. Not kept in the run log.
    """

    rel: float = 0.05
    min_steps: int = 30
    max_steps: int = 2000
    check_every: int = 10
    until: Optional[Callable[[Any, Any], bool]] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.rel, (int, float)) and 0 < self.rel < 1):
            raise LoadEvalError(
                f"AutoStop rel must be between 0 and 1, like 0.05, not {self.rel!r}."
            )
        for name in ("min_steps", "max_steps", "check_every"):
            check_int(f"AutoStop {name}", getattr(self, name), 1)
        if self.min_steps > self.max_steps:
            raise LoadEvalError(
                f"AutoStop min_steps ({self.min_steps}) must not exceed max_steps ({self.max_steps})."
            )

    def precise_enough(self, steady: Sequence[float]) -> bool:
        """True when ``steady`` step times pin down both the median and the mean."""
        if len(steady) < self.min_steps:
            return False
        lo, med, hi = median_ci(steady)
        if med <= 0 or hi / med - 1 > self.rel or 1 - lo / med > self.rel:
            return False
        mlo, mean, mhi = mean_ci(steady)
        return mean > 0 and (mhi - mean) / mean <= self.rel

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "until"}
        if self.until is not None:
            out["until"] = getattr(self.until, "__name__", "until")
        return out


class AutoChunker:
    """Feeds a source to a timed iterator in chunks and decides, between chunks, to stop.

    ``starts`` is the epoch's list of step-start stamps (the timed iterator appends one
    before asking the source for each batch), so when a chunk runs out ``starts`` holds
    one stamp per batch served plus the current request: every served step is complete,
    and ``len(starts) - 1`` batches were served.
    """

    def __init__(
        self,
        source: Iterator[Any],
        starts: Any,
        auto: AutoStop,
        warmup: int,
        on_stop: Optional[Callable[[int, str], None]] = None,
    ) -> None:
        self.source = source
        self.starts = starts
        self.auto = auto
        self.warmup = warmup
        self.on_stop = on_stop
        self.asked = 0

    def chunks(self) -> Iterator[Any]:
        from itertools import chain

        return chain.from_iterable(iter(self._next_chunk, None))

    def _next_chunk(self) -> Optional[Iterator[Any]]:
        s = self.starts
        served = len(s) - 1
        if self.asked and served < self.asked:
            self._stop("loader exhausted", served)
            return None
        if served >= self.auto.max_steps:
            self._stop("max_steps", served)
            return None
        if served and served - self.warmup >= self.auto.min_steps:
            steady = [s[i + 1] - s[i] for i in range(self.warmup, served)]
            if self.auto.precise_enough(steady):
                self._stop("converged", served)
                return None
        k = max(self.auto.check_every, served // 10)
        if not served:
            k = max(k, self.warmup + self.auto.min_steps)
        k = min(k, self.auto.max_steps - served)
        self.asked = served + k
        return islice(self.source, k)

    def _stop(self, reason: str, served: int) -> None:
        if self.on_stop is not None:
            self.on_stop(served, reason)
