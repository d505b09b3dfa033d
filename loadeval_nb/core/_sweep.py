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

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._adaptive import mean_ci
from ._env import loader_settings
from ._errors import LoadEvalError
from ._evaluator import LoaderEvaluator
from ._format import fmt_pct
from ._loader import loader_knobs, shutdown_persistent_workers
from ._predict import Prediction
from ._report import Fact, Report
from ._run import Run, describe_steady
from ._runner import check_run_args, check_writable_dir, evaluator_for, log_path, measure
from ._settings import RunHooks, RunSettings
from ._stats import describe
from ._sweep_spec import SweepPlan, config_label, prepare_sweep
from ._whatif import predict_from_runs

NEAR_BEST = 0.03
"""A configuration within this share of the fastest counts as just as good (cheaper wins)."""


@dataclass
class SweepPoint:
    """One configuration: its runs (repeats pooled), measured and predicted rates."""

    config: dict[str, Any]
    label: str
    knobs: dict[str, Any]
    evs: list[LoaderEvaluator] = field(default_factory=list)
    predicted_steps_per_s: Optional[float] = None
    error: Optional[BaseException] = None

    def runs(self) -> list[Run]:
        """The runs of this configuration (a finished evaluator hands out the same Run)."""
        return [ev.to_run() for ev in self.evs]

    def steady_s(self) -> list[float]:
        return [x for run in self.runs() for x in run.steady_step_s()]

    def stats(self) -> dict[str, Any]:
        return describe_steady(self.runs())

    @property
    def steps_per_s(self) -> Optional[float]:
        return self.stats()["steps_per_s"]

    def rel_ci(self) -> Optional[float]:
        """Half-width of the mean step's 95 % interval over the mean (None: too few steps)."""
        xs = self.steady_s()
        if len(xs) < 10:
            return None
        lo, mean, hi = mean_ci(xs)
        return (hi - mean) / mean if mean > 0 else None

    @property
    def repeats(self) -> int:
        return len(self.evs)

    def median_load_s(self) -> Optional[float]:
        """Median per-batch production time measured inside this configuration's workers."""
        xs = sorted(x for ev in self.evs for x in (ev.worker_load_ns() or []))
        return xs[len(xs) // 2] / 1e9 if xs else None


class SweepHooks(RunHooks):
    """Pair hooks plus a call after each configuration (the dashboard's chart)."""

    def point_done(self, point: SweepPoint, result: SweepResult) -> None:
        pass


@dataclass
class SweepResult:
    label: str
    loader: dict[str, Any]
    points: list[SweepPoint] = field(default_factory=list)
    ideal: Optional[LoaderEvaluator] = None
    ideal_again: Optional[LoaderEvaluator] = None
    """The ideal measured a second time, when a configuration beat the first (an ideal
    run slowed by outside load would make a real configuration look faster than ideal)."""
    prediction: Optional[Prediction] = None
    best: Optional[SweepPoint] = None
    error: Optional[BaseException] = None
    failed_run: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ideal_steps_per_s(self) -> Optional[float]:
        """The ideal loader's speed: the faster of its measurements (outside load only ever
        slows an ideal run down)."""
        rates = [
            describe(ev.to_run().steady_step_s())["steps_per_s"]
            for ev in (self.ideal, self.ideal_again)
            if ev is not None
        ]
        rates = [r for r in rates if r]
        return max(rates) if rates else None

    def beats_ideal(self) -> list[SweepPoint]:
        """Configurations measured faster than the ideal loader: within noise of it."""
        ideal = self.ideal_steps_per_s
        return [p for p in self.points if ideal and p.steps_per_s and p.steps_per_s > ideal]

    def _of_ideal(self, rate: Optional[float]) -> str:
        ideal = self.ideal_steps_per_s
        if not rate or not ideal:
            return "n/a"
        return "~100% (within noise)" if rate > ideal else fmt_pct(rate / ideal)

    def table(self) -> list[dict[str, Any]]:
        ideal = self.ideal_steps_per_s
        rows = []
        for p in self.points:
            st = p.stats()
            rate = st["steps_per_s"]
            rows.append(
                {
                    "label": p.label,
                    **p.knobs,
                    "repeats": p.repeats,
                    "mean_step_s": st["mean_s"],
                    "steps_per_s": rate,
                    "samples_per_s": st["samples_per_s"],
                    "predicted_steps_per_s": p.predicted_steps_per_s,
                    "of_ideal": rate / ideal if rate and ideal else None,
                    "rel_ci": p.rel_ci(),
                    "median_load_s": p.median_load_s(),
                    "error": f"{type(p.error).__name__}: {p.error}" if p.error else None,
                }
            )
        return rows

    def recommendation(self) -> str:
        if self.best is None:
            return "No configuration finished, so there is nothing to recommend."
        b = self.best
        rate = b.steps_per_s or 0.0
        ideal = self.ideal_steps_per_s
        # compare with the loader's own setting when the sweep measured it
        current = {k: self.loader.get(k) for k in ("num_workers", "pin_memory", "prefetch_factor")}
        ref = next(
            (
                p
                for p in self.points
                if p.error is None and all(p.knobs.get(k) == v for k, v in current.items())
            ),
            None,
        )
        vs_first = (
            f", {rate / ref.steps_per_s:.2f}× the current setting ({ref.label})"
            if ref is not None and ref is not b and ref.steps_per_s
            else ""
        )
        of_ideal = ""
        if ideal and rate > ideal:
            of_ideal = ", as fast as the ideal loader within noise"
        elif ideal:
            of_ideal = f", {fmt_pct(rate / ideal)} of the ideal loader's speed"
        settings = ", ".join(f"{k}={v}" for k, v in b.config.items())
        return f"Recommended: {settings} ({rate:,.1f} steps/s{vs_first}{of_ideal})."

    def facts(self) -> Report:
        """The sweep's facts, once: :meth:`report` and the notebook's card render this."""
        rows = []
        for r in self.table():
            if r["error"]:
                rows.append((r["label"], "failed", "", "", r["error"]))
                continue
            rate, pred = r["steps_per_s"], r["predicted_steps_per_s"]
            noise = f" ±{r['rel_ci']:.1%}" if r["rel_ci"] is not None else ""
            rows.append(
                (
                    r["label"],
                    "n/a" if rate is None else f"{rate:,.1f}{noise}",
                    "n/a" if pred is None else f"{pred:,.1f}",
                    self._of_ideal(rate),
                    f"{r['repeats']} run{'s' if r['repeats'] > 1 else ''}",
                )
            )
        ideal = self.ideal_steps_per_s
        notes = [n for n in (self.load_drift_note(), self.ideal_note()) if n]
        return Report(
            kind="sweep",
            title=f"Sweep{' ' + self.label if self.label else ''}",
            headline=self.recommendation(),
            facts=(
                Fact("ideal", "ideal loader", "n/a" if ideal is None else f"{ideal:,.1f} steps/s"),
            ),
            columns=("configuration", "steps/s measured", "simulator", "of ideal", "runs"),
            rows=tuple(rows),
            notes=tuple(notes),
        )

    def ideal_note(self) -> Optional[str]:
        """Say so when a configuration measured faster than the ideal loader."""
        fast = self.beats_ideal()
        if not fast:
            return None
        twice = " (measured twice)" if self.ideal_again is not None else ""
        names = ", ".join(p.label for p in fast)
        return (
            f"{names} measured faster than the ideal loader{twice}: no loader can beat the "
            "ideal, so the difference is run-to-run noise; read it as reaching the ideal, "
            "and rerun on a quiet machine to tell close settings apart."
        )

    def report(self) -> str:
        """The plain-text report (``str(result)``)."""
        return self.facts().text()

    def load_drift_note(self) -> Optional[str]:
        """Say so when a batch took markedly longer to make with more workers running: the
        simulator, fed from one setting, cannot know that (CPU clock, SMT, memory bandwidth)."""
        loads = [(r["label"], r["median_load_s"]) for r in self.table() if r.get("median_load_s")]
        if len(loads) < 2:
            return None
        lo = min(loads, key=lambda x: x[1])
        hi = max(loads, key=lambda x: x[1])
        if hi[1] < 1.15 * lo[1]:
            return None
        return (
            f"a batch took {hi[1] / lo[1] - 1:.0%} longer to make in the workers at {hi[0]} than at "
            f"{lo[0]} ({hi[1] * 1e3:.0f} vs {lo[1] * 1e3:.0f} ms): the cores slow down as more of "
            "them work (clock, SMT, memory bandwidth), which the simulator does not know, so its "
            "predictions for more workers run high"
        )

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.report())


def _pick_best(points: list[SweepPoint]) -> Optional[SweepPoint]:
    done = [p for p in points if p.error is None and p.steps_per_s]
    if not done:
        return None
    top = max(p.steps_per_s or 0.0 for p in done)
    near = [p for p in done if (p.steps_per_s or 0.0) >= (1 - NEAR_BEST) * top]

    def cost(p: SweepPoint) -> tuple[int, int, int]:
        k = p.knobs
        return (
            int(k.get("num_workers") or 0),
            int(bool(k.get("pin_memory"))),
            int(k.get("prefetch_factor") or 0),
        )

    return min(near, key=cost)


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
    if settings.log_dir:
        check_writable_dir(settings.log_dir, "log_dir")
    hooks = hooks or RunHooks()
    result = SweepResult(label=label, loader=loader_settings(loader))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    total = 1 + len(configs)
    index = 0
    ev, error = measure(
        "ideal",
        lambda: evaluator_for(
            loader, "ideal", settings, metrics_file=log_path(settings, stamp, "sweep", "ideal")
        ),
        run_once,
        hooks,
        index,
        total,
        loader_name,
    )
    result.ideal = ev
    if error is not None:
        result.error, result.failed_run = error, "ideal"
        return result
    try:
        seen: dict[str, int] = {}
        for cfg, dl in zip(configs, loaders):
            name0 = config_label(cfg)
            seen[name0] = seen.get(name0, 0) + 1
            name1 = name0 if seen[name0] == 1 else f"{name0} #{seen[name0]}"
            point = SweepPoint(cfg, name1, loader_knobs(dl))
            result.points.append(point)
            for rep in range(max_repeats):
                index += 1
                if rep:
                    total += 1  # a repeat: one run more than planned
                name = f"{point.label}{' (again)' if rep else ''}"
                path = log_path(settings, stamp, f"sweep-{point.label}-{rep + 1}", "real")

                # labelled by its configuration in the live status and the run log
                make = functools.partial(
                    evaluator_for, dl, "real", settings, metrics_file=path, label=name
                )
                ev, error = measure("real", make, run_once, hooks, index, total, loader_name)
                if ev is not None:
                    point.evs.append(ev)
                if error is not None:
                    point.error = error
                    result.error, result.failed_run = error, point.label
                    break
                noise = point.rel_ci()
                if noise is not None and noise <= noise_rel:
                    break
            shutdown_persistent_workers(dl)  # persistent workers are not needed past their point
            if result.prediction is None and result.ideal is not None and point.evs:
                try:
                    result.prediction = predict_from_runs(point.runs()[0], result.ideal.to_run())
                except LoadEvalError:
                    result.prediction = None
            _fill_predictions(result)
            result.best = _pick_best(result.points)
            if isinstance(hooks, SweepHooks):
                hooks.point_done(point, result)
            if result.error is not None:
                break
        if result.error is None and result.beats_ideal():
            # a configuration beat the ideal: the ideal run was probably slowed by outside
            # load; measure it again and keep the faster reading
            ev, error = measure(
                "ideal",
                lambda: evaluator_for(
                    loader,
                    "ideal",
                    settings,
                    metrics_file=log_path(settings, stamp, "sweep", "ideal-again"),
                ),
                run_once,
                hooks,
                index,
                index + 1,
                loader_name,
            )
            result.ideal_again = ev
            if error is not None:
                result.error, result.failed_run = error, "ideal"
            result.best = _pick_best(result.points)
    finally:
        for dl in loaders:
            shutdown_persistent_workers(dl)
    return result


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
