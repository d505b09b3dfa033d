"""Running a training function as a real + ideal pair: the orchestration behind ``%%loadeval``.

Framework-agnostic: ``run_once(wrapper)`` is whatever runs the user's loop with
``wrapper`` in place of the loader (in the notebook: the cell, re-executed).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .._env import dist_rank, interrupts_deferred, loader_settings
from .._errors import OptionError
from ..measure.cache import check_cache_fits
from ..measure.evaluator import LoaderEvaluator
from ..record.run import Run
from ..verdict.diagnose import Diagnosis, diagnose
from .runner import (
    PAIR_NEEDS_TWO_PASSES,
    check_run_args,
    check_writable_dir,
    evaluator_for,
    is_one_shot,
    log_path,
    measure,
    refuse_one_shot,
    same_evaluator,
)
from .settings import RunHooks, RunSettings


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

    def runs(self) -> dict[str, Optional[Run]]:
        """``{"real": Run | None, "ideal": Run | None}`` (a finished evaluator hands out
        the same Run each time)."""
        pairs = (("real", self.real), ("ideal", self.ideal))
        return {w: (ev.to_run() if ev is not None else None) for w, ev in pairs}

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


def run_pair(
    loader: Any,
    run_once: Callable[[LoaderEvaluator], None],
    settings: Optional[RunSettings] = None,
    *,
    hooks: Optional[RunHooks] = None,
    label: str = "",
    loader_name: str = "the loader",
    repeats: Optional[int] = None,
) -> PairResult:
    """Run ``run_once`` with a log-mode wrapper of ``loader``, then with a replay wrapper.

    ``repeats`` (or ``settings.repeat``) runs the pair that many times in ABBA order (real,
    ideal, ideal, real, real, ideal, ...), each side's repeats as epochs of one wrapper, so
    that load on the machine lands on both sides and the interval holds the spread
    between repeats.

    Never raises for a failure inside a run: the error is stored in the result
    (``error``, ``failed_run``) after everything is cleaned up and the partial run
    kept, so the caller can show it and then re-raise. A one-shot iterator for a
    whole pair raises :class:`LoadEvalError` before anything runs.
    """
    settings = check_run_args(loader, run_once, settings)
    if repeats is not None:
        settings = dataclasses.replace(settings, repeat=repeats)
    if settings.auto and dist_rank() is not None:
        # each rank would stop at its own step, and the ranks' collectives would pair up wrong
        raise OptionError(
            "steps",
            "='auto' stops each rank on its own, which desynchronises the ranks' collectives "
            "under torch.distributed; pass a number of steps.",
        )
    if settings.only is None:
        refuse_one_shot(
            loader,
            loader_name,
            PAIR_NEEDS_TWO_PASSES,
            "run one side alone (only='real' or only='ideal')",
        )
    if settings.log_dir:
        check_writable_dir(settings.log_dir, "log_dir")
    if settings.only != "real" and not is_one_shot(loader):
        # the replay's cache is checked now, not after the whole real run
        check_cache_fits(loader, settings.cache, cache_on=settings.cache_on)
    hooks = hooks or RunHooks()
    result = PairResult(label=label, loader=loader_settings(loader))
    which_runs = [w for w in ("real", "ideal") if settings.only in (None, w)]
    order = [
        which
        for r in range(settings.repeat)
        for which in (which_runs if r % 2 == 0 else which_runs[::-1])
    ]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for index, which in enumerate(order):
        made = getattr(result, which)
        if made is not None:  # a repeat: the same wrapper again, one more epoch
            make: Callable[[], LoaderEvaluator] = functools.partial(same_evaluator, made)
        else:
            path = log_path(settings, stamp, label, which)
            if path:
                result.log_paths[which] = path
            make = functools.partial(evaluator_for, loader, which, settings, metrics_file=path)
        ev, error = measure(which, make, run_once, hooks, index, len(order), loader_name)
        if ev is not None:
            setattr(result, which, ev)
        if error is not None:
            result.error, result.failed_run = error, which
            return result
    with interrupts_deferred():  # both runs are done: the verdict is not lost to a Ctrl-C
        runs = result.runs()
        if runs["real"] is not None and runs["ideal"] is not None:
            result.diagnosis = diagnose(runs["real"], runs["ideal"])
    return result
