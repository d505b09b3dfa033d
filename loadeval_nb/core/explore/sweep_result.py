"""A sweep's results: each configuration's runs, the ideal, the recommendation and the
report (see :mod:`.sweep` for how a sweep runs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .._facts import Fact, Facts
from .._format import fmt_pct, fmt_rate
from .._stats import blocks_disagree, describe
from ..measure.adaptive import mean_ci
from ..record.run import Run, describe_steady
from ..whatif.predict import Prediction
from .result import Result
from .settings import RunHooks

NEAR_BEST = 0.03
"""A configuration within this share of the fastest counts as just as good (cheaper wins)."""


@dataclass
class SweepPoint:
    """One configuration: its runs (repeats pooled), measured and predicted rates."""

    config: dict[str, Any]
    label: str
    knobs: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    """This configuration's runs (its repeats), in order."""
    predicted_steps_per_s: Optional[float] = None
    error: Optional[BaseException] = None

    def steady_s(self) -> list[float]:
        return [x for run in self.runs for x in run.steady_step_s()]

    def stats(self) -> dict[str, Any]:
        return describe_steady(self.runs)

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
        """Blocks (or repeats) measured: the epochs of its runs."""
        return sum(max(len(run.blocks), 1) for run in self.runs)

    def blocks(self) -> list[list[float]]:
        """The steady step times of each block (each run's epochs), in order."""
        return [b for run in self.runs for _, b in sorted(run.steady_by_block().items())]

    @property
    def within_noise(self) -> bool:
        """Its blocks, measured at different times, disagree beyond their noise: never
        recommended, never a "× current"."""
        return blocks_disagree(self.blocks())

    def median_load_s(self) -> Optional[float]:
        """Median per-batch production time measured inside this configuration's workers."""
        xs = sorted(x for run in self.runs for x in (run.worker_load_ns or []))
        return xs[len(xs) // 2] / 1e9 if xs else None


class SweepHooks(RunHooks):
    """Pair hooks plus a call after each configuration (the dashboard's chart)."""

    def point_done(self, point: SweepPoint, result: SweepResult) -> None:
        pass


@dataclass
class SweepResult(Result):
    points: list[SweepPoint] = field(default_factory=list)
    ideal: Optional[Run] = None
    ideal_again: Optional[Run] = None
    """The ideal measured a second time, when a configuration beat the first (an ideal
    run slowed by outside load would make a real configuration look faster than ideal)."""
    prediction: Optional[Prediction] = None
    best: Optional[SweepPoint] = None
    blocks: int = 1
    """2: every configuration and the ideal measured in two blocks in mirrored order
    (ideal, each configuration, then back), so that they are compared interleaved."""

    @property
    def ideal_steps_per_s(self) -> Optional[float]:
        """The ideal loader's speed: the faster of its measurements (outside load only ever
        slows an ideal run down)."""
        rates = [
            describe(run.steady_step_s())["steps_per_s"]
            for run in (self.ideal, self.ideal_again)
            if run is not None
        ]
        rates = [r for r in rates if r]
        return max(rates) if rates else None

    def beats_ideal(self) -> list[SweepPoint]:
        """Configurations measured faster than the ideal loader: within noise of it."""
        ideal = self.ideal_steps_per_s
        # (a configuration with other torch threads changes the step itself, not the loader:
        # it may well beat an ideal measured with the threads as they were)
        return [
            p
            for p in self.points
            if ideal and p.steps_per_s and p.steps_per_s > ideal and "num_threads" not in p.config
        ]

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
                    "within_noise": p.within_noise,
                    "median_load_s": p.median_load_s(),
                    "error": f"{type(p.error).__name__}: {p.error}" if p.error else None,
                }
            )
        return rows

    def recommendation(self) -> str:
        if self.best is None:
            if any(p.within_noise and p.error is None for p in self.points):
                return (
                    "Nothing to recommend: the configurations' blocks disagreed beyond their "
                    "noise (the machine's speed changed during the sweep); rerun on a quiet "
                    "machine."
                )
            return "No configuration finished, so there is nothing to recommend."
        b = self.best
        rate = b.steps_per_s or 0.0
        ideal = self.ideal_steps_per_s
        # compare with the loader's own setting when the sweep measured it
        current = {
            k: self.loader_settings.get(k) for k in ("num_workers", "pin_memory", "prefetch_factor")
        }
        ref = next(
            (
                p
                for p in self.points
                if p.error is None and all(p.knobs.get(k) == v for k, v in current.items())
            ),
            None,
        )
        vs_first = ""
        if ref is not None and ref is not b and ref.steps_per_s and self.blocks >= 2:
            # measured interleaved with the current setting: each block pair a ratio
            ratios = [
                (sum(x) / len(x)) / (sum(y) / len(y))
                for x, y in zip(ref.blocks(), b.blocks())
                if x and y and sum(y) > 0
            ]
            if ref.within_noise or (ratios and min(ratios) <= 1.0 <= max(ratios)):
                vs_first = f", within noise of the current setting ({ref.label})"
            else:
                vs_first = f", {rate / ref.steps_per_s:.2f}× the current setting ({ref.label})"
        of_ideal = ""
        if ideal and rate > ideal:
            of_ideal = ", as fast as the ideal loader within noise"
        elif ideal:
            of_ideal = f", {fmt_pct(rate / ideal)} of the ideal loader's speed"
        settings = ", ".join(f"{k}={v}" for k, v in b.config.items())
        return f"Recommended: {settings} ({fmt_rate(rate)} steps/s{vs_first}{of_ideal})."

    def facts(self) -> Facts:
        """The sweep's facts, once: :meth:`text` and the notebook's card render this."""
        rows = []
        for r in self.table():
            if r["error"]:
                rows.append((r["label"], "failed", "", "", r["error"]))
                continue
            rate, pred = r["steps_per_s"], r["predicted_steps_per_s"]
            noise = f" ±{r['rel_ci']:.1%}" if r["rel_ci"] is not None else ""
            if r["within_noise"]:
                noise += " (blocks disagree: within noise)"
            rows.append(
                (
                    r["label"],
                    "n/a" if rate is None else f"{fmt_rate(rate)}{noise}",
                    fmt_rate(pred),
                    self._of_ideal(rate),
                    f"{r['repeats']} {'block' if self.blocks >= 2 else 'run'}"
                    f"{'s' if r['repeats'] > 1 else ''}",
                )
            )
        ideal = self.ideal_steps_per_s
        notes = [n for n in (self.load_drift_note(), self.ideal_note()) if n]
        return Facts(
            kind="sweep",
            title=f"Sweep{' ' + self.label if self.label else ''}",
            headline=self.recommendation(),
            facts=(
                Fact(
                    "ideal",
                    "ideal loader",
                    "n/a" if ideal is None else f"{fmt_rate(ideal)} steps/s",
                ),
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


def pick_best(points: list[SweepPoint]) -> Optional[SweepPoint]:
    # a configuration whose blocks disagree is within noise: never the recommendation
    done = [p for p in points if p.error is None and p.steps_per_s and not p.within_noise]
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
