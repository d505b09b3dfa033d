"""How a pair, a ladder or a sweep runs (:class:`RunSettings`), and the hooks that watch it."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .._errors import OptionError, check_choice, check_int, check_interval
from ..measure.adaptive import AutoStop

if TYPE_CHECKING:
    from ..measure.evaluator import LoaderEvaluator


@dataclass(frozen=True)
class RunSettings:
    """How each run of a pair, a ladder or a sweep is measured. Checked when made (an
    :class:`OptionError` names the bad option), so a settings object is always valid;
    derive another with ``dataclasses.replace(settings, cache=40)``.

    ``steps`` counts every step of a run, warm-up included; ``"auto"`` stops each run
    once its step time is known to ±5 % (see :class:`AutoStop`; ``auto_stop`` overrides
    its defaults).
    """

    steps: Any = 200
    warmup: int = 10
    cache: int = 20
    cache_on: str = "host"
    only: Optional[str] = None
    log_dir: Optional[str] = None
    sample_interval_s: Optional[float] = 0.1
    auto_stop: Optional[AutoStop] = None
    worker_timing: bool = True
    """Time each batch inside the DataLoader's worker processes (feeds the simulator)."""
    repeat: int = 1
    """Run the pair this many times in ABBA order (real, ideal, ideal, real, ...): the
    verdict's interval then holds the spread between repeats, not only between steps."""
    checked: bool = field(default=False, repr=False, compare=False)
    """Set by a front end that made a run's checks (one-shot loader, writable ``log_dir``,
    options that do not apply) before it ran: the runner does not make them again."""

    def __post_init__(self) -> None:
        self.validate()

    @property
    def auto(self) -> bool:
        return self.steps == "auto"

    def validate(self) -> None:
        """Raise :class:`OptionError` for a bad value (run when the settings are made)."""
        check_int("warmup", self.warmup, 0)
        check_int("repeat", self.repeat, 1)
        if self.repeat > 20:
            raise OptionError("repeat", f" must be from 1 to 20, not {self.repeat!r}.")
        check_interval("sample_interval_s", self.sample_interval_s)
        if self.auto_stop is not None and not self.auto:
            raise OptionError(
                "auto_stop",
                f" applies to steps='auto', not steps={self.steps!r}; pass one or the other.",
            )
        if self.auto:
            auto = self.auto_stop or AutoStop()
            if self.warmup >= auto.max_steps:
                raise OptionError(
                    "warmup",
                    f" ({self.warmup}) must be smaller than the adaptive stop's max_steps "
                    f"({auto.max_steps}).",
                )
        elif self.steps is not None and (
            isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1
        ):
            raise OptionError(
                "steps", f" must be a positive integer or 'auto', not {self.steps!r}."
            )
        if isinstance(self.steps, int) and self.warmup >= self.steps:
            raise OptionError(
                "warmup",
                f" ({self.warmup}) must be smaller than steps ({self.steps}): warm-up steps are "
                "not measured.",
            )
        if isinstance(self.cache, bool) or not isinstance(self.cache, int) or self.cache < 1:
            raise OptionError(
                "cache", f" must be a positive number of batches, not {self.cache!r}."
            )
        check_choice("cache_on", self.cache_on, ("host", "device"))
        check_choice("only", self.only, (None, "real", "ideal"))


class RunHooks:
    """Callbacks around each run of a pair, a ladder or a sweep (the dashboard subclasses
    this). Every method is optional."""

    def run_started(self, which: str, ev: LoaderEvaluator, index: int, total: int) -> None:
        pass

    def run_ended(self, which: str, ev: LoaderEvaluator, error: Optional[BaseException]) -> None:
        pass

    def progress(self, text: str) -> None:
        """Work between runs that may take a while (the ladder making its samples)."""


_RENAMED = {"PairSettings": RunSettings, "PairHooks": RunHooks}


def deprecated_name(module: str, name: str) -> Any:
    """The new object behind an old name, with a :class:`DeprecationWarning` (kept for one
    release: ``PairSettings`` is ``RunSettings``, ``PairHooks`` is ``RunHooks``)."""
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{name} is now {new.__name__} (it drives pairs, ladders and sweeps); "
        f"import {new.__name__} from loadeval_nb instead.",
        DeprecationWarning,
        stacklevel=3,
    )
    return new


def __getattr__(name: str) -> Any:
    return deprecated_name(__name__, name)
