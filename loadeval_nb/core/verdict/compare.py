"""Comparing two runs, for CI: did the step time regress beyond what is allowed?

``compare_runs(before, after)`` takes the steady steps of each (run logs, runs or
evaluators), the ratio of their mean steps with a block-bootstrap interval, and calls a
regression only when the slowdown is both over ``max_slowdown`` and significant (the
interval's lower end above 1): noise alone never fails a build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .._facts import Fact, Facts, Reported
from .._format import fmt_pct, fmt_seconds
from .._stats import bootstrap_ratio_ci
from ..errors import LoadEvalError
from ..record.run import describe_steady
from .diagnose import as_run, setup_changes, setup_differences
from .diagnosis import MIN_STEADY_STEPS


def parse_share(text: Any) -> float:
    """``"5%"``, ``"0.05"`` or ``0.05`` → 0.05; one sentence for anything else."""
    percent = isinstance(text, str) and text.strip().endswith("%")
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        t = str(text).strip()
        try:
            value = float(t[:-1]) / 100 if percent else float(t)
        except ValueError:
            raise LoadEvalError(f"{text!r} is not a share; write it like 5% or 0.05.") from None
    # "5" meant 5 %, not 500 %: a share of 1 or more must say so with a %
    if not 0 <= value < (10 if percent else 1):
        raise LoadEvalError(f"{text!r} is not a share; write it like 5% or 0.05.")
    return value


@dataclass
class Comparison(Reported):
    """``after`` against ``before``: mean steps, their ratio and its interval (seconds)."""

    before_step_s: Optional[float]
    after_step_s: Optional[float]
    ratio: Optional[float]
    """Mean step after / before: above 1 is slower."""
    ratio_ci: tuple[Optional[float], Optional[float]]
    before_samples_per_s: Optional[float]
    after_samples_per_s: Optional[float]
    max_slowdown: float
    before_steps: int
    after_steps: int
    notes: tuple[str, ...] = ()
    """What makes the two runs unlike (a real run against an ideal one)."""
    machines: Optional[str] = None
    """How the two runs' machines or setups differ (``host a → b``), said beside the
    result; None when they agree or are not recorded."""

    @property
    def regression(self) -> bool:
        """Slower by more than ``max_slowdown``, and significantly slower at all."""
        lo = self.ratio_ci[0]
        return (
            self.ratio is not None
            and self.ratio > 1 + self.max_slowdown
            and lo is not None
            and lo > 1.0
        )

    def headline(self) -> str:
        if self.ratio is None:
            return f"not enough steady steps to compare (at least {MIN_STEADY_STEPS} in each run)."
        change = self.ratio - 1
        if self.regression:
            return (
                f"REGRESSION: steps are {fmt_pct(change, 1)} slower, over the "
                f"{fmt_pct(self.max_slowdown, 1)} allowed."
            )
        if abs(change) < 0.0005:
            return "OK: steps take the same time."
        if change > 0:
            return f"OK: steps are {fmt_pct(change, 1)} slower, within what is allowed or noise."
        return f"OK: steps are {fmt_pct(-change, 1)} faster."

    def facts(self) -> Facts:
        lo, hi = self.ratio_ci
        ci = (
            f" (95% CI {_signed(lo - 1)} to {_signed(hi - 1)})"
            if lo is not None and hi is not None
            else ""
        )
        facts = [
            Fact(
                "step",
                "mean step",
                f"{fmt_seconds(self.before_step_s)} → {fmt_seconds(self.after_step_s)}"
                + (f", {_signed(self.ratio - 1)}{ci}" if self.ratio is not None else ""),
            ),
        ]
        if self.machines:
            facts.append(
                Fact(
                    "machines",
                    "machines",
                    f"different machines or setups ({self.machines}): a change may come "
                    "from the machine, not the code",
                )
            )
        facts.append(
            Fact("steps", "steady steps", f"{self.before_steps} before, {self.after_steps} after")
        )
        b, a = self.before_samples_per_s, self.after_samples_per_s
        if a and b:
            facts.append(
                Fact(
                    "throughput",
                    "throughput",
                    f"{b:,.1f} → {a:,.1f} samples/s, {_signed(a / b - 1)}",
                )
            )
        return Facts(
            kind="compare",
            title="Compare",
            headline=self.headline(),
            facts=tuple(facts),
            notes=self.notes,
        )


def _signed(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{fmt_pct(abs(x), 1)}"


def compare_runs(before: Any, after: Any, *, max_slowdown: Any = 0.05) -> Comparison:
    """Compare ``after`` with ``before`` (run logs, runs or evaluators): see the module
    docstring. ``max_slowdown`` is a share (``0.05`` or ``"5%"``)."""
    share = parse_share(max_slowdown)
    b, a = as_run(before, "before"), as_run(after, "after")
    bs, as_ = b.steady_step_s(), a.steady_step_s()
    db, da = describe_steady([b]), describe_steady([a])
    ratio: Optional[float] = None
    ci: tuple[Optional[float], Optional[float]] = (None, None)
    if (
        len(bs) >= MIN_STEADY_STEPS
        and len(as_) >= MIN_STEADY_STEPS
        and db["mean_s"]
        and da["mean_s"]
    ):
        ratio = da["mean_s"] / db["mean_s"]
        ci = bootstrap_ratio_ci(as_, bs)
    notes = []
    if b.mode != a.mode:
        sides = {"log": "a real run (log mode)", "replay": "an ideal run (replay mode)"}
        notes.append(
            f"before is {sides.get(b.mode, b.mode)} and after {sides.get(a.mode, a.mode)}: "
            "this compares the real loader with the ideal one, not a change of your code; "
            "compare two real runs"
        )
    return Comparison(
        notes=tuple(notes),
        machines=setup_changes(b, a) if setup_differences(b, a) else None,
        before_step_s=db["mean_s"],
        after_step_s=da["mean_s"],
        ratio=ratio,
        ratio_ci=ci,
        before_samples_per_s=db["samples_per_s"],
        after_samples_per_s=da["samples_per_s"],
        max_slowdown=share,
        before_steps=len(bs),
        after_steps=len(as_),
    )
