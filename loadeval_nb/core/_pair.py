"""Running a training function as a real + ideal pair: the orchestration behind ``%%loadeval``.

Framework-agnostic: ``run_once(wrapper)`` is whatever runs the user's loop with
``wrapper`` in place of the loader (in the notebook: the cell, re-executed).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._adaptive import AutoStop
from ._diagnosis import Diagnosis, diagnose
from ._env import loader_settings
from ._errors import LoadEvalError, check_int
from ._evaluator import LoaderEvaluator

__all__ = ["PairSettings", "PairResult", "PairHooks", "run_pair", "measure", "evaluator_for"]


@dataclass
class PairSettings:
    """How to run a pair. ``steps`` counts every step of a run, warm-up included;
    ``"auto"`` stops each run once its step time is known to ±5 % (see :class:`AutoStop`,
    ``auto_stop`` overrides its defaults)."""

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

    @property
    def auto(self) -> bool:
        return self.steps == "auto"

    def validate(self) -> None:
        check_int("warmup", self.warmup, 0)
        if self.auto_stop is not None and not self.auto:
            raise LoadEvalError(
                f"auto_stop applies to steps='auto', not steps={self.steps!r}; pass one or the other."
            )
        if self.auto:
            auto = self.auto_stop or AutoStop()
            if self.warmup >= auto.max_steps:
                raise LoadEvalError(
                    f"warmup ({self.warmup}) must be smaller than the adaptive stop's max_steps ({auto.max_steps})."
                )
        elif self.steps is not None and (
            isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1
        ):
            raise LoadEvalError(f"steps must be a positive integer or 'auto', not {self.steps!r}.")
        if isinstance(self.steps, int) and self.warmup >= self.steps:
            raise LoadEvalError(
                f"warmup ({self.warmup}) must be smaller than steps ({self.steps}): warm-up steps are not measured."
            )
        if not isinstance(self.cache, int) or self.cache < 1:
            raise LoadEvalError(f"cache must be a positive number of batches, not {self.cache!r}.")
        if self.cache_on not in ("host", "device"):
            raise LoadEvalError(f"cache_on must be 'host' or 'device', not {self.cache_on!r}.")
        if self.only not in (None, "real", "ideal"):
            raise LoadEvalError(f"only must be 'real' or 'ideal', not {self.only!r}.")


@dataclass
class PairResult:
    """What a pair produced, including a run that failed half-way (kept, never dropped)."""

    label: str
    loader: dict[str, Any]
    real: Optional[LoaderEvaluator] = None
    ideal: Optional[LoaderEvaluator] = None
    diagnosis: Optional[Diagnosis] = None
    error: Optional[BaseException] = None
    failed_run: Optional[str] = None
    log_paths: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def row(self) -> dict[str, Any]:
        """One history-table row: settings and results."""
        d = self.diagnosis
        return {
            "label": self.label,
            **{
                k: self.loader.get(k)
                for k in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
            },
            "real_step_s": d.real_step_s if d else None,
            "ideal_step_s": d.ideal_step_s if d else None,
            "speedup": d.speedup if d else None,
            "verdict": d.verdict if d else ("failed" if self.error else None),
        }


class PairHooks:
    """Callbacks around each run (the dashboard subclasses this)."""

    def run_started(self, which: str, ev: LoaderEvaluator, index: int, total: int) -> None:
        pass

    def run_ended(self, which: str, ev: LoaderEvaluator, error: Optional[BaseException]) -> None:
        pass

    def progress(self, text: str) -> None:
        """Work between runs that may take a while (the ladder making its samples)."""


def evaluator_for(
    loader: Any,
    which: str,
    settings: PairSettings,
    *,
    mode: Optional[str] = None,
    cache_on: Optional[str] = None,
    metrics_file: Optional[str] = None,
    label: Optional[str] = None,
    worker_timing: Optional[bool] = None,
) -> LoaderEvaluator:
    """The wrapper one run of a pair, ladder or sweep uses, from the shared settings
    (``label`` defaults to ``which``; ``worker_timing`` to the settings' in log mode)."""
    mode = mode or ("log" if which == "real" else "replay")
    if worker_timing is None:
        worker_timing = settings.worker_timing and mode == "log"
    return LoaderEvaluator(
        loader,
        mode=mode,
        num_cached_batches=settings.cache,
        metrics_file=metrics_file,
        max_steps=settings.steps,
        warmup_steps=settings.warmup,
        cache_on=cache_on or settings.cache_on,
        sample_interval_s=settings.sample_interval_s,
        label=label or which,
        auto_stop=settings.auto_stop,
        worker_timing=worker_timing,
    )


def measure(
    which: str,
    make: Callable[[], LoaderEvaluator],
    run_once: Callable[[LoaderEvaluator], None],
    hooks: PairHooks,
    index: int,
    total: int,
    loader_name: str,
) -> tuple[Optional[LoaderEvaluator], Optional[BaseException]]:
    """One run: build the wrapper, tell the hooks, run the user's loop, clean up.

    Never raises: a failure (KeyboardInterrupt included) comes back as the error,
    with the partial run kept in the wrapper.
    """
    ev: Optional[LoaderEvaluator] = None
    error: Optional[BaseException] = None
    try:
        ev = make()
        hooks.run_started(which, ev, index, total)
        run_once(ev)
        if ev.total_steps == 0:
            raise LoadEvalError(
                f"The cell never iterated {loader_name}; loop over it (for batch in {loader_name}: ...)."
            )
    except BaseException as e:  # KeyboardInterrupt included: clean up, keep, report
        error = e
    finally:
        if ev is not None:
            ev.close()
    if ev is not None:
        hooks.run_ended(which, ev, error)
    return ev, error


def log_path(settings: PairSettings, stamp: str, label: str, which: str) -> Optional[str]:
    """Where a run's JSON log goes under ``--log-dir`` (None without one)."""
    if not settings.log_dir:
        return None
    os.makedirs(settings.log_dir, exist_ok=True)
    name = f"loadeval-{stamp}{'-' + label if label else ''}-{which}.json"
    return os.path.join(settings.log_dir, name.replace(" ", "_").replace("/", "_"))


def is_one_shot(loader: Any) -> bool:
    """A generator or other iterator, used up by one pass (``iter(x) is x``). Asked only of
    objects with ``__next__``: ``iter()`` on a DataLoader would start its workers."""
    if not callable(getattr(type(loader), "__next__", None)):
        return False
    try:
        return iter(loader) is loader
    except TypeError:
        return False


PAIR_NEEDS_TWO_PASSES = "the real run would use up the batches the replay needs"


def refuse_one_shot(loader: Any, loader_name: str, why: str, instead: str = "") -> None:
    """One sentence (a :class:`LoadEvalError`) for a one-shot iterator where the loop runs
    more than once; ``why`` says why it must, ``instead`` what else the user may do."""
    if is_one_shot(loader):
        raise LoadEvalError(
            f"{loader_name} is a one-shot iterator (a {type(loader).__name__}): {why}; pass a "
            f"re-iterable loader such as a DataLoader{', or ' + instead if instead else ''}."
        )


def run_pair(
    loader: Any,
    run_once: Callable[[LoaderEvaluator], None],
    settings: PairSettings,
    *,
    hooks: Optional[PairHooks] = None,
    label: str = "",
    loader_name: str = "the loader",
) -> PairResult:
    """Run ``run_once`` with a log-mode wrapper of ``loader``, then with a replay wrapper.

    Never raises for a failure inside a run: the error is stored in the result
    (``error``, ``failed_run``) after everything is cleaned up and the partial run
    kept, so the caller can show it and then re-raise. Bad settings raise
    :class:`LoadEvalError` before anything runs.
    """
    settings.validate()
    if settings.only is None:
        refuse_one_shot(
            loader,
            loader_name,
            PAIR_NEEDS_TWO_PASSES,
            "run one side alone (only='real' or only='ideal')",
        )
    hooks = hooks or PairHooks()
    result = PairResult(label=label, loader=loader_settings(loader))
    which_runs = [w for w in ("real", "ideal") if settings.only in (None, w)]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for index, which in enumerate(which_runs):
        path = log_path(settings, stamp, label, which)
        if path:
            result.log_paths[which] = path
        ev, error = measure(
            which,
            lambda: evaluator_for(loader, which, settings, metrics_file=path),  # noqa: B023
            run_once,
            hooks,
            index,
            len(which_runs),
            loader_name,
        )
        if ev is not None:
            setattr(result, which, ev)
        if error is not None:
            result.error, result.failed_run = error, which
            return result
    if result.real is not None and result.ideal is not None:
        result.diagnosis = diagnose(result.real, result.ideal)
    return result
