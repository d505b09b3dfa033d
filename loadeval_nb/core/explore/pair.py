"""Running a training function as a real + ideal pair: the orchestration behind ``%%loadeval``.

Framework-agnostic: ``run_once(wrapper)`` is whatever runs the user's loop with
``wrapper`` in place of the loader (in the notebook: the cell, re-executed).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from .._env import dist_rank, interrupts_deferred, loader_settings, safe_len
from .._facts import Action, Facts, option_name, said
from ..errors import CacheBudgetError, LoadEvalError, OptionError
from ..measure.adaptive import AutoStop
from ..measure.cache import budget_checker, nothing_to_measure
from ..measure.epochs import EpochPair, epochs_fit, pair_epochs
from ..measure.evaluator import LoaderEvaluator
from ..measure.interleave import NotInterleavable, plan_pass
from ..measure.loader import TUNABLE
from ..measure.variant import VARIANT, Variant
from ..record.history import HistoryRow
from ..record.run import DEFAULT_STEPS, SIDES, Run
from ..verdict.diagnose import Diagnosis, diagnose
from ..verdict.diagnosis import Note
from ..verdict.interval import told
from .result import Result
from .runner import (
    PAIR_NEEDS_TWO_PASSES,
    Runner,
    abba,
    check_run_args,
    check_writable_dir,
    evaluator_for,
    refuse_one_shot,
)
from .settings import RunHooks, RunSettings


@dataclass
class PairResult(Result):
    """What a pair produced, including a run that failed half-way (kept, never dropped):
    the two :class:`Run` records and the verdict, no wrapper and no replay cache."""

    real: Optional[Run] = None
    ideal: Optional[Run] = None
    diagnosis: Optional[Diagnosis] = None
    contended: Optional[Run] = None
    """The contended arm's run (on where cheap, or ``RunSettings(contention=True)``): cached
    batches while the loader kept producing; None without that arm."""
    variant: Optional[Run] = None
    """The variant arm's run (``RunSettings(variants=...)``, ``--try``): the loader rebuilt
    with other settings, in the same pass; None without that arm."""

    @classmethod
    def from_runs(
        cls,
        real: Optional[Run],
        ideal: Optional[Run],
        *,
        label: str,
        diagnosis: Optional[Diagnosis],
        settings: Optional[RunSettings] = None,
        log_paths: Optional[dict[str, str]] = None,
        contended: Optional[Run] = None,
        variant: Optional[Run] = None,
    ) -> PairResult:
        """A pair made after the fact from its two runs (a script's, the logs a watch
        followed): the loader's settings are the real run's, and a missing run is the one
        that failed; ``contended``, the contended arm's run where the pass had it.
        ``diagnosis`` is given, never computed here: whether the runs earned a
        verdict is the caller's to say (a crashed script's runs do not). :func:`run_pair`
        fills its result in place while it runs."""
        missing = [s for s, r in (("real", real), ("ideal", ideal)) if r is None]
        return cls(
            label=label,
            loader_settings=dict(real.loader_settings) if real is not None else {},
            log_paths=dict(log_paths or {}),
            settings=settings,
            real=real,
            ideal=ideal,
            contended=contended,
            variant=variant,
            diagnosis=diagnosis,
            failed=missing[0] if missing else None,
        )

    def runs(self) -> dict[str, Optional[Run]]:
        """``{"real": Run | None, "ideal": Run | None}``."""
        return {"real": self.real, "ideal": self.ideal}

    def row(self) -> HistoryRow:
        """This pair as a row of the rerun panel's history: settings and results."""
        d = self.diagnosis
        knobs = {k: self.loader_settings.get(k) for k in TUNABLE}
        return HistoryRow(
            label=self.label,
            **knobs,
            num_cached_batches=self.settings.num_cached_batches if self.settings else None,
            real_step_s=d.real_step_s if d else None,
            ideal_step_s=d.ideal_step_s if d else None,
            speedup=d.speedup if d else None,
            verdict=d.verdict if d else ("failed" if self.error else None),
        )

    def facts(self) -> Facts:
        """The verdict's facts; a pair that failed or ran one side says so."""
        if self.diagnosis is not None:
            return self.diagnosis.facts()
        if self.error is not None:
            headline = f"the {self.failed} run failed ({type(self.error).__name__}: {self.error})"
        else:
            done = [w for w, r in self.runs().items() if r is not None]
            headline = f"only the {' and '.join(done) or 'no'} run measured: no verdict"
        return Facts(kind="verdict", title="Pair", headline=headline)


def run_pair(
    loader: Any,
    run_once: Callable[[LoaderEvaluator], None],
    settings: Optional[RunSettings] = None,
    *,
    hooks: Optional[RunHooks] = None,
    label: str = "",
    loader_name: str = "the loader",
) -> PairResult:
    """Measure the pair over ``run_once``: by default one pass of the loader in which real
    and replayed (ideal) blocks are interleaved (``LoaderEvaluator(mode="pair")``), the
    replay cache filled from the pass's first batches; with ``settings.interleave``
    off (or a loader too short for blocks, said in a note), a log-mode run of ``loader``
    (the real run), then a replay run (the ideal run), the loader started twice.

    ``settings.repeat`` runs a one-after-the-other pair that many times in A B B A order
    (real, ideal, ideal, real, real, ideal, ...), each side's repeats as epochs of one
    wrapper, so that load on the machine lands on both sides and the interval holds the
    spread between repeats. A cache that would not fit is refused from the real side's
    first batch, before it goes on.

    Never raises for a failure inside a run: the error is stored in the result
    (``error``, ``failed``) after everything is cleaned up and the partial run kept, so
    the caller can show it and then re-raise. A one-shot iterator for a whole pair
    raises :class:`LoadEvalError` before anything runs.
    """
    settings = check_run_args(loader, run_once, settings)
    if not settings.checked:
        check_pair(loader, settings, loader_name, "keywords")
    hooks = hooks or RunHooks()
    result = PairResult(label=label, loader_settings=loader_settings(loader), settings=settings)
    which_runs = [w for w in ("real", "ideal") if settings.only in (None, w)]
    # the replay's cache is checked on the real run's first batch, not on a batch of its
    # own: another start of the user's loader would cost its workers' start-up again
    budget_check = (
        budget_checker(settings.num_cached_batches, cache_on=settings.cache_on)
        if "ideal" in which_runs
        else None
    )
    if settings.variants and settings.variant is None:  # "advice": a first pass decides it
        return _advised(loader, run_once, settings, hooks, label, loader_name)
    plan = plan_pair(loader, settings)
    planned, why_not = plan.planned, plan.reason
    if plan.method == "blocks":
        runner = Runner(result, run_once, settings, hooks, loader_name, 1)
        runner.measure(
            "pair",
            functools.partial(_interleaved, loader, settings, budget_check, runner, planned),
            which="pair",
        )
        runs = runner.take_pair("pair")
    elif plan.method == "epochs":
        runs = _on_epochs(loader, settings, plan, result, run_once, hooks, loader_name)
    else:
        order = abba(which_runs, settings.repeat)
        runner = Runner(result, run_once, settings, hooks, loader_name, len(order))
        for which in order:
            make = functools.partial(_evaluator, loader, which, settings, budget_check)
            if runner.measure(which, make) is not None:
                break
        runs = runner.take_all()
    result.real, result.ideal = runs.get("real"), runs.get("ideal")
    result.contended = runs.get("contended")
    result.variant = runs.get(VARIANT)
    if result.failed == "pair":
        result.failed = "real" if result.real is None or not result.ideal else "pair"
    if isinstance(result.error, CacheBudgetError) and result.failed in ("real", "pair"):
        raise result.error  # refused on the real run's first batch: a setting to change
    if result.error is None and result.real is not None and result.ideal is not None:
        with interrupts_deferred():  # both runs are done: the verdict is not lost to a Ctrl-C
            result.diagnosis = diagnose(
                result.real, result.ideal, contended=result.contended, variant=result.variant
            )
            if why_not is not None:
                rule = "on_epochs" if plan.method == "epochs" else "sequential"
                result.diagnosis.notes.append(Note(why_not, rule))
            if plan.method == "runs" and settings.variant is not None:
                result.diagnosis.notes.append(
                    Note(
                        f"the variant ({settings.variant.words}) was not measured: it is "
                        "served only in an interleaved pass",
                        "variant_not_served",
                    )
                )
    return result


def _advised(
    loader: Any,
    run_once: Callable[[LoaderEvaluator], None],
    settings: RunSettings,
    hooks: Optional[RunHooks],
    label: str,
    loader_name: str,
) -> PairResult:
    """``variants="advice"``: a first pass without a variant, then, where its advice names
    a setting (the simulator's ``num_workers``), a second pass with that setting as the
    variant arm: the advice measured on the user's loop. The second pass's result, its
    verdict saying which setting the first advised; the first's where there is nothing to
    try, or it failed."""
    first = run_pair(
        loader,
        run_once,
        replace(settings, variants=()),
        hooks=hooks,
        label=label,
        loader_name=loader_name,
    )
    d = first.diagnosis
    if d is None:
        return first
    if not d.advised:
        d.notes.append(nothing_advised(d))
        return first
    second = run_pair(
        loader,
        run_once,
        replace(settings, variants=(Variant.of(d.advised),)),
        hooks=hooks,
        label=label,
        loader_name=loader_name,
    )
    if second.diagnosis is not None and second.diagnosis.tried is not None:
        second.diagnosis.tried.advised = True
    return second


NOTHING_ADVISED = Note(
    "nothing to try from the advice: the simulator names no num_workers that would be "
    "faster (the variant arm was not run)",
    "nothing_advised",
)
"""``--try advice`` where the first pass's advice names nothing to try."""

NOTHING_PREDICTED = Note(
    "nothing to try from the advice: the simulator made no prediction, as the first pass "
    "could not tell its verdict (on a busy machine, rerun when it is quiet; or name a "
    "setting to try) (the variant arm was not run)",
    "nothing_advised",
)
"""``--try advice`` where the first pass made no prediction to take advice from."""


def nothing_advised(d: Diagnosis) -> Note:
    """Why ``--try advice`` runs no second pass: no prediction, or none worth a try."""
    return NOTHING_ADVISED if d.prediction is not None else NOTHING_PREDICTED


@dataclass(frozen=True)
class PairPlan:
    """How a pair is measured, decided once, before anything runs (:func:`plan_pair`):

    * ``"blocks"``: one pass of the loader, the sides interleaved in blocks within it
      (``planned``: the pass's plan, handed to the pass, which does not plan again);
    * ``"epochs"``: a loader whose epoch is too short for blocks, measured on the loop's
      own epochs, whole epochs a side in A B B A order (``epochs`` of them; the loop is
      run again where it ran fewer), ``reason`` saying why;
    * ``"runs"``: the real run, then the ideal run (``reason`` says why, None where the
      settings asked for whole runs: ``interleave=False``, ``only``, ``repeat``)."""

    method: str
    planned: Any = None
    epochs: int = 0
    reason: Optional[str] = None
    why: Optional[str] = None
    """Why not blocks, in the pass's own words (the loader's epoch, the steps): what a
    front end that goes on by other means says of it (the script runner's status)."""


def plan_pair(loader: Any, settings: RunSettings) -> PairPlan:
    """The pair's method and plan, made once (and, under a process group, agreed once):
    blocks where the loader's epoch holds them, else the loop's own epochs where the
    loader has a length that leaves steady steps an epoch (one process, no variant), else
    whole runs in turn, each with the sentence that says why."""
    if not settings.interleave or settings.only is not None or settings.repeat != 1:
        return PairPlan("runs")
    if not _pass_steps(loader, settings):
        return PairPlan(
            "runs",
            reason=(
                "the pair ran its real run, then its ideal run, because no steps were given "
                "and the loader's epoch has none to split into blocks: a drift of the machine "
                "between the two runs is in the difference"
            ),
            why="no steps were given and the loader has no length to take half of",
        )
    try:
        return PairPlan("blocks", planned=pass_plan(loader, settings))
    except NotInterleavable as e:
        n = epochs_fit(loader, settings.warmup, settings.steps)
        if e.epoch_limited and n and dist_rank() is None:
            sides = 3 if settings.variant is not None else 2  # (the variant: a third side)
            return PairPlan(
                "epochs",
                epochs=pair_epochs(settings.steps, n, sides),
                reason=(
                    f"the pair was measured on the loop's own epochs, whole epochs a side in "
                    f"A B B A order, because {e.reason}"
                ),
                why=e.reason,
            )
        return PairPlan(
            "runs",
            reason=(
                f"the pair ran its real run, then its ideal run, because {e.reason}: a drift "
                "of the machine between the two runs is in the difference"
                + ("" if e.epoch_limited else "; pass more steps to interleave")
            ),
            why=e.reason,
        )


def pass_plan(loader: Any, settings: RunSettings) -> Any:
    """The interleaved pass's plan for ``loader`` with these settings, as
    :func:`~..measure.blocks.plan_pass` makes it (the one rule; under a process group,
    every rank's same answer): what a pass given it as ``planned=`` serves, its arms
    named before anything runs (the script's child claims their logs' names from it).
    Raises :class:`~..measure.blocks.NotInterleavable` where the pass cannot interleave
    (a loader too short, no steps)."""
    steps = _pass_steps(loader, settings)
    if not steps:
        raise NotInterleavable(
            "no steps were given and the loader has no length to take half of",
            epoch_limited=False,
        )
    return plan_pass(  # the one rule (and, under a process group, every rank's same answer)
        loader,
        steps=steps,
        warmup=settings.warmup,
        num_cached_batches=settings.num_cached_batches,
        auto_stop=pair_auto(settings),
        contention=settings.contention,
        # (a loader that cannot be rebuilt is one sentence here, before anything runs)
        variant=v.rebuild(loader) if (v := settings.variant) else None,
    )


PAIR_AUTO_MAX = 2 * DEFAULT_STEPS
"""A pair's adaptive stop's steps a side at most, where its :class:`AutoStop` is not given:
twice the default pass."""


def pair_auto(settings: RunSettings) -> Optional[AutoStop]:
    """A pair's adaptive stop (``steps="auto"``; None without it): the settings' own
    :class:`AutoStop` (or the defaults) and, unless it names its own ``until``, the
    verdict's: the A B B A cycles go on until the blocks' interval, with every term the
    verdict adds, decides its label and is no wider than ``4 * rel`` (20 % by default),
    or until ``max_steps`` a side (:data:`PAIR_AUTO_MAX` where no ``AutoStop`` is given)
    or the loader's epoch."""
    if not settings.auto:
        return None
    # the pair's own budget unless one is given: twice the default pass, not the one-run
    # stop's 2,000 steps (a gain at the line would take them all, ten times the default)
    auto = settings.auto_stop or AutoStop(max_steps=PAIR_AUTO_MAX)
    if auto.until is not None:
        return auto
    width = 4 * auto.rel

    def tells(real: Run, ideal: Run) -> bool:
        return told(real, ideal, width)

    return replace(auto, until=tells)


def _pass_steps(loader: Any, settings: RunSettings) -> int:
    """The steps a side the pass's plan is made for: ``steps`` (half the loader's epoch
    where none is given), or the adaptive stop's fewest."""
    if settings.auto:
        return int((settings.auto_stop or AutoStop()).min_steps + settings.warmup)
    n = safe_len(loader)
    return int(settings.steps if settings.steps is not None else (n // 2 if n else 0))


def epoch_pair(
    loader: Any,
    settings: RunSettings,
    paths: Callable[[tuple[str, ...]], Mapping[str, Optional[str]]],
) -> EpochPair:
    """The pair on the loop's own epochs for ``loader`` with these settings, for every
    front end (``run_pair``, what ``%%loadeval`` runs, and the script runner's child):
    whole epochs a side (the loop's epoch is the block, never cut) in A B B A order,
    ``steps`` saying how many (enough to hold that many steps a side), the variant a
    third side where one is asked (the loader rebuilt once); ``paths`` names the logs of
    the sides it is given."""
    n = len(loader)
    whole = replace(settings, steps=n)
    v = settings.variant
    rebuilt = v.rebuild(loader) if v is not None else None
    files = paths((*SIDES, VARIANT) if rebuilt is not None else SIDES)
    return EpochPair(
        evaluator_for(loader, "real", whole, metrics_file=files["real"]),
        evaluator_for(loader, "ideal", whole, metrics_file=files["ideal"]),
        epochs=pair_epochs(settings.steps, n, 3 if rebuilt is not None else 2),
        variant=(
            evaluator_for(rebuilt, "real", whole, metrics_file=files[VARIANT])
            if rebuilt is not None
            else None
        ),
        settings=v.settings if v is not None else None,
    )


def _on_epochs(
    loader: Any,
    settings: RunSettings,
    plan: PairPlan,
    result: PairResult,
    run_once: Callable[[LoaderEvaluator], None],
    hooks: RunHooks,
    loader_name: str,
) -> dict[str, Run]:
    """The pair on the loop's own epochs (:class:`~..measure.epochs.EpochPair`): whole
    epochs of the loader a side in A B B A order, each ``iter()`` the loop's next epoch.
    The loop is run again (the cell, the function) while the schedule has epochs left and
    the last run measured some, so a loop over one epoch gets its sides in turn as a loop
    over several does; the schedule's epochs, not the loop's, end it."""
    runner = Runner(result, run_once, settings, hooks, loader_name, 1)
    made: list[EpochPair] = []

    def make(_path: Optional[str]) -> Any:
        pair = epoch_pair(loader, settings, lambda arms: {w: runner.path_for(w) for w in arms})
        made.append(pair)
        return pair

    error = runner.measure("pair", make, which="pair")
    if made and made[0].started:  # the loop's epochs a run: the runs the schedule needs
        runner.total = max(1, math.ceil(plan.epochs / made[0].started))
    while error is None and made and not made[0].last:
        before = made[0].started
        error = runner.measure("pair", make, which="pair")
        if made[0].started == before:
            break
    return runner.take_pair("pair")


def _interleaved(
    loader: Any,
    settings: RunSettings,
    budget_check: Optional[Callable[[Any], None]],
    runner: Runner,
    planned: Any,
    path: Optional[str],
) -> LoaderEvaluator:
    files = {w: runner.path_for(w) for w in planned[0].arms}  # the plan's arms, never guessed
    return LoaderEvaluator(
        loader,
        mode="pair",
        **pair_keywords(loader, settings),
        label=runner.result.label or None,
        metrics_files=files,
        first_batch=budget_check,
        planned=planned,
    )


def pair_keywords(loader: Any, settings: RunSettings) -> dict[str, Any]:
    """What ``settings`` make of an interleaved pass, as ``LoaderEvaluator(loader,
    mode="pair", ...)``'s keywords: one place for every front end's pair (``run_pair``
    here, the script runner's child), so that a setting reaches the pass from one line."""
    n = safe_len(loader)
    return {
        "steps": settings.steps if settings.steps is not None else (n or 0) // 2,
        "warmup": settings.warmup,
        "num_cached_batches": settings.num_cached_batches,
        "cache_on": settings.cache_on,
        "sample_interval_s": settings.sample_interval_s,
        "auto_stop": pair_auto(settings),
        "worker_timing": settings.worker_timing,
        "contention": settings.contention,
        "variant": settings.variant,
    }


def _evaluator(
    loader: Any,
    which: str,
    settings: RunSettings,
    budget_check: Optional[Callable[[Any], None]],
    path: Optional[str],
) -> LoaderEvaluator:
    check = budget_check if which == "real" else None
    return evaluator_for(loader, which, settings, metrics_file=path, first_batch=check)


def check_pair(loader: Any, settings: RunSettings, loader_name: str, spelling: str) -> None:
    """The checks a pair needs before anything runs, made once (by :func:`plan_run` in a
    front end, or here); ``spelling`` says how a sentence names a setting."""
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
            said(
                [
                    "run one side alone with ",
                    Action("only", "real"),
                    " or ",
                    Action("only", "ideal"),
                ],
                spelling,
            ),
        )
    if settings.log_dir:
        check_writable_dir(settings.log_dir, option_name("log_dir", spelling))
    if settings.only != "real" and safe_len(loader) == 0:  # len() starts no worker
        raise LoadEvalError(nothing_to_measure(loader))
