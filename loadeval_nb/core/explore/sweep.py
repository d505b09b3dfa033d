"""Settings sweep: the real loop once per DataLoader configuration, the ideal once.

``"num_workers=0,2,4; pin_memory=False,True"`` is the Cartesian product of the
values (6 configurations). Each configuration's loader is rebuilt from the user's
(same dataset, sampler, collate_fn, ...; the user's object is untouched) and run
in log mode; a configuration whose mean step is not known to ±5 % (batch-means
interval) is run again, up to ``max_repeats`` times, its steps pooled. Beside each
measured point the simulator's prediction (fed from the first configuration's
first run, its worker timings or its waits, and the ideal run) is kept, and a setting is recommended: the
fastest measured, or the cheapest one within 3 % of it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

from .._env import loader_settings, torch_threads
from ..errors import LoadEvalError
from ..measure.adaptive import mean_ci
from ..measure.evaluator import LoaderEvaluator
from ..measure.loader import loader_knobs, shutdown_persistent_workers
from ..whatif.from_runs import predict_from_runs
from .runner import Runner, check_many_runs, check_run_args, evaluator_for
from .settings import RunHooks, RunSettings
from .sweep_result import SweepHooks, SweepPoint, SweepResult, pick_best
from .sweep_spec import SweepPlan, config_label, prepare_sweep


def run_sweep(
    loader: Any,
    run_once: Callable[[LoaderEvaluator], None],
    configs: Any,
    settings: Optional[RunSettings] = None,
    *,
    hooks: Optional[RunHooks] = None,
    label: str = "",
    loader_name: str = "the loader",
    max_repeats: int = 2,
    noise_rel: float = 0.05,
) -> SweepResult:
    """Run the ideal once, then the real loop once per configuration (twice when noisy).

    ``configs`` is a sweep string, a dict of lists, a list of dicts, or a :class:`SweepPlan`
    from :func:`prepare_sweep` (``loader`` must then be the one it was made from). Never raises for
    a failure inside a run (kept in the result, the sweep stops there); bad configs
    raise :class:`LoadEvalError` before anything runs.
    """
    settings = check_run_args(loader, run_once, settings)
    plan = (
        configs if isinstance(configs, SweepPlan) else prepare_sweep(loader, configs, loader_name)
    )
    configs, loaders = plan.configs, plan.loaders
    if not settings.checked:
        check_sweep(loader, settings, loader_name, "keywords")
    hooks = hooks or RunHooks()
    result = SweepResult(label=label, loader_settings=loader_settings(loader), settings=settings)
    # two blocks in mirrored order (ideal, each configuration, then back), half the steps
    # each: a drift of the machine lands on every configuration and on the ideal alike,
    # and a configuration whose two blocks disagree is within noise, never recommended
    steps = settings.steps
    blocks = 2 if isinstance(steps, int) and steps >= 2 * (settings.warmup + 20) else 1
    if blocks == 2:
        settings = dataclasses.replace(settings, steps=-(-steps // 2))
    result.blocks = blocks
    runner = Runner(result, run_once, settings, hooks, loader_name, blocks * (1 + len(configs)))

    def ideal(key: str) -> Optional[BaseException]:
        make = functools.partial(_evaluator, loader, "ideal", settings, None)
        error = runner.measure(key, make, which="ideal", log_label="sweep")
        if error is not None:
            result.failed = "ideal"
        return error

    points: list[tuple[SweepPoint, Any]] = []
    seen: dict[str, int] = {}
    for cfg, dl in zip(configs, loaders):
        name0 = config_label(cfg)
        seen[name0] = seen.get(name0, 0) + 1
        name1 = name0 if seen[name0] == 1 else f"{name0} #{seen[name0]}"
        knobs = loader_knobs(dl)
        if "num_threads" in cfg:
            knobs["num_threads"] = cfg["num_threads"]
        points.append((SweepPoint(cfg, name1, knobs), dl))

    def measure_point(point: SweepPoint, dl: Any, block: int) -> Optional[BaseException]:
        if point not in result.points:
            result.points.append(point)
        # labelled by its configuration in the live status and the run log
        make = functools.partial(_evaluator, dl, "real", settings, point.label)
        with torch_threads(point.config.get("num_threads")):
            error = runner.measure(
                point.label, make, which="real", log_label=f"sweep-{point.label}-{block}"
            )
        if error is not None:
            point.error = error
            result.failed = point.label
        return error

    def point_done(point: SweepPoint, dl: Any) -> None:
        run = runner.take(point.label)
        if run is not None:
            point.runs.append(run)
        shutdown_persistent_workers(dl)  # persistent workers are not needed past their point
        if result.prediction is None and result.ideal is not None and point.runs:
            try:
                result.prediction = predict_from_runs(point.runs[0], result.ideal)
            except LoadEvalError:
                result.prediction = None
        _fill_predictions(result)
        result.best = pick_best(result.points)
        if isinstance(hooks, SweepHooks):
            hooks.point_done(point, result)

    try:
        if ideal("ideal") is not None:
            result.ideal = runner.take("ideal")
            return result
        if blocks == 1:
            result.ideal = runner.take("ideal")
            for point, dl in points:
                error = _one_block_with_repeats(
                    point, dl, measure_point, runner, max_repeats, noise_rel
                )
                point_done(point, dl)
                if error is not None:
                    return result
        else:
            for point, dl in points:
                if measure_point(point, dl, 1) is not None:
                    break
            if result.error is None:
                for point, dl in reversed(points):
                    if measure_point(point, dl, 2) is not None:
                        break
                    if point is points[0][0]:
                        ideal("ideal")  # the ideal's second block closes the mirror
                    point_done(point, dl)
            result.ideal = runner.take("ideal")
            for point, dl in points:  # a point the run stopped in still keeps its run
                if runner.holds(point.label):
                    point_done(point, dl)
            _fill_predictions(result)
            result.best = pick_best(result.points)
        if result.error is None and result.beats_ideal():
            # a configuration beat the ideal: the ideal run was probably slowed by outside
            # load; measure it again and keep the faster reading
            runner.total += 1
            ideal("ideal-again")
            result.ideal_again = runner.take("ideal-again")
            result.best = pick_best(result.points)
    finally:
        for dl in loaders:
            shutdown_persistent_workers(dl)
    return result


def _one_block_with_repeats(
    point: SweepPoint,
    dl: Any,
    measure_point: Callable[[SweepPoint, Any, int], Optional[BaseException]],
    runner: Runner,
    max_repeats: int,
    noise_rel: float,
) -> Optional[BaseException]:
    """A short sweep (one block): the configuration's run, run again (its steps pooled)
    while its mean step is not known to ± ``noise_rel``."""
    for rep in range(max_repeats):
        if rep:
            runner.total += 1  # a repeat: one run more than planned
        error = measure_point(point, dl, rep + 1)
        if error is not None:
            return error
        run = runner.so_far(point.label)
        xs = run.steady_step_s() if run is not None else []
        if len(xs) >= 10:
            lo, mean, hi = mean_ci(xs)
            if mean > 0 and (hi - mean) / mean <= noise_rel:
                break
    return None


def _evaluator(
    loader: Any, which: str, settings: RunSettings, label: Optional[str], path: Optional[str]
) -> LoaderEvaluator:
    return evaluator_for(loader, which, settings, metrics_file=path, label=label)


def _fill_predictions(result: SweepResult) -> None:
    pred = result.prediction
    if pred is None:
        return
    for p in result.points:
        nw = p.knobs.get("num_workers")
        if isinstance(nw, int):
            pf = p.knobs.get("prefetch_factor") if nw else None
            try:
                p.predicted_steps_per_s = pred.result(nw, pf).steps_per_s
            except LoadEvalError:
                p.predicted_steps_per_s = None


def check_sweep(loader: Any, settings: RunSettings, loader_name: str, spelling: str) -> None:
    """The checks a sweep needs before anything runs, made once (see :func:`plan_run`)."""
    check_many_runs(
        loader, settings, loader_name, spelling, "sweep", "configuration",
        "it runs a noisy configuration again by itself (max_repeats); drop repeat.",
        "it runs the ideal once and every configuration; drop only.",
    )  # fmt: skip
