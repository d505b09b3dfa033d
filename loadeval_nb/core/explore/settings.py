"""How a pair, a ladder or a sweep runs (:class:`RunSettings`), and the hooks that watch it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from .._errors import check_choice, check_int, check_interval
from .._files import expand_path
from ..errors import OptionError
from ..measure.adaptive import AutoStop
from ..measure.variant import ADVICE, Variant


@dataclass(frozen=True)
class RunSettings:
    """How each run of a pair, a ladder or a sweep is measured. Checked when made (an
    :class:`OptionError` names the bad option), so a settings object is always valid;
    derive another with ``dataclasses.replace(settings, num_cached_batches=40)``.

    Each setting has one name from ``%%loadeval``'s option to the evaluator that uses
    it: ``steps`` (``--steps``; every step of a run, warm-up included; ``"auto"`` stops
    each run once its step time is known to ±5 %, see :class:`AutoStop`, whose
    ``auto_stop`` overrides its defaults), ``warmup`` (``--warmup``) and
    ``num_cached_batches`` (DALI's name; ``--cache`` for short, as ``%timeit -n`` is
    ``number``).
    """

    steps: Any = 200
    warmup: int = 10
    num_cached_batches: int = 20
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
    interleave: bool = True
    """A pair's real and ideal steps interleaved in blocks in one loop (A B B A), so that a
    drift of the machine lands on both sides; False: the real run, then the ideal run
    (each a whole run of the loop, as ``repeat`` does)."""
    contention: Optional[bool] = None
    """A third arm in the interleaved pass (cached batches while the loader keeps
    producing): the verdict splits the headroom into waiting for data and the CPU loading
    takes from the step. None (the default): where it is cheap, a loader with workers
    whose pass it lengthens by a quarter at most within the loader's epoch, without
    shortening the pair's blocks; True: whenever the loader has workers
    (``--contention``); False: never (``--no-contention``). A loader without workers gets
    none, and the verdict says why."""
    log_to: Any = ()
    """Trackers the verdict is also written to when the run ends (``--log-to``):
    ``"tensorboard:DIR"``, ``"mlflow"``, ``"wandb"``, ``"trainer"`` (a Lightning or Hugging
    Face Trainer's own loggers); one entry or a sequence. Written by the front ends and
    ``fit_pair`` / ``train_pair`` (``loadeval_nb.integrations.trackers``), not by
    ``run_pair`` itself."""
    checked: bool = field(default=False, repr=False, compare=False)
    """Set by a front end that made a run's checks (one-shot loader, writable ``log_dir``,
    options that do not apply) before it ran: the runner does not make them again."""
    variants: Any = ()
    """A variant arm in the interleaved pass (``--try``): the loader rebuilt with other
    settings (``"num_workers=4, pin_memory=True"``, ``{"num_workers": 4}``, a
    :class:`~loadeval_nb.core.measure.variant.Variant`), its blocks interleaved with the
    real ones, and the verdict says what it bought, with its interval, measured in the same
    pass; ``"advice"``: what the first pass's advice names, measured in a second pass. One
    variant a pass; given as one entry or a sequence of one, kept as a tuple of
    :class:`Variant` (or ``"advice"``)."""

    def __post_init__(self) -> None:
        # the dataclass's own __init__ takes every field; what a field may be given as
        # (a path with ~, one tracker, one variant) becomes what it is kept as, then checked
        log_dir, log_to = self.log_dir, self.log_to
        if isinstance(log_dir, (str, os.PathLike)):
            log_dir = expand_path(log_dir)  # ~/runs and $SCRATCH/runs, as a shell reads them
        if isinstance(log_to, str):
            log_to = (log_to,)
        elif isinstance(log_to, list):
            log_to = tuple(log_to)
        object.__setattr__(self, "log_dir", log_dir)
        object.__setattr__(self, "log_to", log_to)
        object.__setattr__(self, "variants", _variants(self.variants))
        self.validate()

    @property
    def auto(self) -> bool:
        return self.steps == "auto"

    def validate(self) -> None:
        """Raise :class:`OptionError` for a bad value (run when the settings are made)."""
        check_int("warmup", self.warmup, 0)
        check_int("repeat", self.repeat, 1)
        for name in ("interleave", "contention"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "contention" and value is None):
                also = ", or None (where it is cheap)" if name == "contention" else ""
                raise OptionError(name, f" must be True or False{also}, not {value!r}.")
        if self.repeat > 20:
            raise OptionError("repeat", f" must be from 1 to 20, not {self.repeat!r}.")
        check_interval("sample_interval_s", self.sample_interval_s)
        if not isinstance(self.log_to, tuple) or not all(
            isinstance(t, str) and t for t in self.log_to
        ):
            raise OptionError(
                "log_to", f" must be a tracker's name or a list of them, not {self.log_to!r}."
            )
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
        n = self.num_cached_batches
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise OptionError(
                "num_cached_batches", f" must be a positive number of batches, not {n!r}."
            )
        check_choice("cache_on", self.cache_on, ("host", "device"))
        check_choice("only", self.only, (None, "real", "ideal"))
        if self.variants and (not self.interleave or self.only is not None or self.repeat > 1):
            raise OptionError(
                "variants",
                ": a variant is measured only in an interleaved pass, where a drift of the "
                "machine lands on every arm; try it without the settings that ask for whole "
                "runs (sequential, only, repeat).",
            )

    @property
    def variant(self) -> Optional[Variant]:
        """The variant the pass serves (None: none, or ``"advice"`` not yet decided)."""
        v = self.variants[0] if self.variants else None
        return v if isinstance(v, Variant) else None


def _variants(spec: Any) -> tuple[Any, ...]:
    """``variants`` as kept: a tuple of one :class:`Variant` or ``"advice"`` (or none)."""
    if spec is None or spec == () or spec == []:
        return ()
    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    if len(items) > 1:
        raise OptionError(
            "variants",
            f" holds {len(items)} variants; one a pass is measured: give one (a sweep tries "
            "several settings one after the other).",
        )
    item = items[0]
    if isinstance(item, str) and item.strip().lower() == ADVICE:
        return (ADVICE,)
    return (Variant.of(item),)


class RunHooks:
    """Callbacks around each run of a pair, a ladder or a sweep (the dashboard subclasses
    this). Every method is optional."""

    def run_started(self, which: str, ev: Any, index: int, total: int) -> None:
        pass

    def run_ended(self, which: str, ev: Any, error: Optional[BaseException]) -> None:
        pass

    def progress(self, text: str) -> None:
        """Work between runs that may take a while (the ladder making its samples)."""
