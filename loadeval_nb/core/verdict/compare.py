"""Comparing two measurements, for CI: did the step time regress beyond what is allowed,
and where did it change?

``compare_runs(before, after)`` takes two runs (run logs, runs or evaluators), two caching
ladders or two transform splits (results, or their saved JSON files). The whole: the
ratio of the mean steps (a ladder's: its least cached rung that ran in both, the real
one as a rule; a split's: the mean time of a sample) with its 95 % interval. The stages
(:mod:`.changes`): each stage both measured, before and after, the change with its
interval, named only beyond noise and at least 5 % of the whole.

A regression is called only when the slowdown is both over ``max_slowdown`` and
significant (the interval's lower end above 1): noise alone never fails a build. With
``stage=``, the gate looks at that stage alone: its change as a share of the whole step
(or sample) before, over ``max_slowdown``, with its interval's lower end above 0.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Optional, Union

from .._errors import a_kind
from .._facts import Fact, Facts, Reported
from .._format import fmt_pct, fmt_seconds
from .._stats import bootstrap_ratio_ci
from ..errors import LoadEvalError, OptionError
from ..record.ladderlog import LadderLog, SplitLog, load_log
from ..record.run import Run, describe_steady
from .changes import (
    MIN_CHANGE_SHARE,
    Change,
    ladder_changes,
    run_changes,
    signed_s,
    split_changes,
    split_whole_ci,
)
from .diagnose import as_run, setup_changes, setup_differences
from .diagnosis import MIN_STEADY_STEPS

__all__ = ["Change", "Comparison", "compare_runs", "parse_share"]


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
    """``after`` against ``before``: mean steps (a sample, for two transform splits), their
    ratio and its interval (seconds), and each stage's change (:attr:`changes`)."""

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
    kind: str = "runs"
    """``runs``, ``ladders`` or ``transform splits``."""
    unit: str = "step"
    """``step``, or ``sample`` for two transform splits (then ``before_step_s`` is the
    mean time of a sample and ``before_steps`` the samples)."""
    whole: Optional[str] = None
    """For two ladders, the rung whose steps are compared whole (``real``)."""
    changes: tuple[Change, ...] = ()
    """Each stage both measured, before and after, in the order they come."""
    stage: Optional[str] = None
    """The one stage the gate looks at (None: the whole step)."""

    @property
    def located(self) -> tuple[Change, ...]:
        """The changes beyond noise and at least 5 % of the whole, the largest first."""
        return tuple(sorted((c for c in self.changes if c.located), key=lambda c: -abs(c.delta_s)))

    @property
    def gated(self) -> Optional[Change]:
        """The change of :attr:`stage` (None without a stage)."""
        return next((c for c in self.changes if c.name == self.stage), None)

    @property
    def judged(self) -> bool:
        """Whether there was enough to judge the gate by: a gate that could not judge
        must not pass (the command line exits 2)."""
        if self.stage is None:
            return self.ratio is not None
        c = self.gated
        return c is not None and c.ci_s[0] is not None and c.share is not None

    @property
    def regression(self) -> bool:
        """Slower by more than ``max_slowdown``, and significantly slower at all; with a
        :attr:`stage`, that stage alone: its change over ``max_slowdown`` of the whole step
        before, its interval's lower end above 0."""
        if self.stage is not None:
            c = self.gated
            lo = c.ci_s[0] if c is not None else None
            return (
                c is not None
                and c.share is not None
                and c.share > self.max_slowdown
                and lo is not None
                and lo > 0
            )
        lo = self.ratio_ci[0]
        return (
            self.ratio is not None
            and self.ratio > 1 + self.max_slowdown
            and lo is not None
            and lo > 1.0
        )

    def headline(self) -> str:
        if self.stage is not None:
            return self._stage_headline()
        if self.ratio is None:
            if self.unit == "sample":
                return f"not enough samples to compare (at least {MIN_STEADY_STEPS} in each split)."
            rung = f" in the {self.whole} rung" if self.whole else ""
            return (
                f"not enough steady steps to compare (at least {MIN_STEADY_STEPS}{rung} in each "
                f"{self.kind[:-1]})."
            )
        change = self.ratio - 1
        things = f"{self.unit}s"
        top = self.located[0] if self.located else None
        where = (
            f"; the change is in {top.name} ({signed_s(top.delta_s)} a {top.unit})" if top else ""
        )
        if self.regression:
            return (
                f"REGRESSION: {things} are {fmt_pct(change, 1)} slower, over the "
                f"{fmt_pct(self.max_slowdown, 1)} allowed{where}."
            )
        if abs(change) < 0.0005:
            return f"OK: {things} take the same time{where}."
        if change > 0:
            return (
                f"OK: {things} are {fmt_pct(change, 1)} slower, within what is allowed or "
                f"noise{where}."
            )
        return f"OK: {things} are {fmt_pct(-change, 1)} faster{where}."

    def _stage_headline(self) -> str:
        c = self.gated
        if c is None or not self.judged:
            return f"not enough measurements to judge the {self.stage} stage."
        of = f"{fmt_pct(abs(c.share or 0.0), 1)} of the {c.unit}"
        if self.regression:
            return (
                f"REGRESSION: {c.name} is {fmt_seconds(c.delta_s)} a {c.unit} slower ({of}), "
                f"over the {fmt_pct(self.max_slowdown, 1)} allowed."
            )
        if c.beyond_noise and c.delta_s < 0:
            return f"OK: {c.name} is {fmt_seconds(-c.delta_s)} a {c.unit} faster ({of})."
        if c.beyond_noise:
            return (
                f"OK: {c.name} is {fmt_seconds(c.delta_s)} a {c.unit} slower ({of}), within "
                f"the {fmt_pct(self.max_slowdown, 1)} allowed."
            )
        return f"OK: {c.name} did not change beyond noise."

    def facts(self) -> Facts:
        lo, hi = self.ratio_ci
        ci = (
            f" (95% CI {_signed(lo - 1)} to {_signed(hi - 1)})"
            if lo is not None and hi is not None
            else ""
        )
        label = f"mean {self.unit}" + (f" ({self.whole} rung)" if self.whole else "")
        facts = [
            Fact(
                self.unit,
                label,
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
        gated = self.gated
        if gated is not None:
            facts.append(
                Fact(
                    "gate",
                    "gate",
                    f"{gated.line()}; fails over +{fmt_pct(self.max_slowdown, 1)} of the "
                    f"{gated.unit}, beyond noise",
                )
            )
        facts += [Fact("changed", "changed", c.line()) for c in self.located]
        if self.changes and not self.located:
            facts.append(
                Fact(
                    "changed",
                    "changed",
                    "no stage beyond noise (each stage's 95% CI holds 0, or its change is "
                    f"under {fmt_pct(MIN_CHANGE_SHARE)} of the {self.unit})",
                )
            )
        if self.unit == "sample":
            facts.append(
                Fact("samples", "samples", f"{self.before_steps} before, {self.after_steps} after")
            )
        else:
            facts.append(
                Fact(
                    "steps",
                    "steady steps",
                    f"{self.before_steps} before, {self.after_steps} after",
                )
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
        rows = tuple(
            (
                c.name,
                c.unit,
                fmt_seconds(c.before_s),
                fmt_seconds(c.after_s),
                signed_s(c.delta_s) + _unnamed(c),
                f"{signed_s(c.ci_s[0])} to {signed_s(c.ci_s[1])}"
                if c.ci_s[0] is not None and c.ci_s[1] is not None
                else "n/a",
            )
            for c in self.changes
        )
        kinds = {"runs": "Compare", "ladders": "Compare ladders"}
        return Facts(
            kind="compare",
            title=kinds.get(self.kind, f"Compare {self.kind}"),
            headline=self.headline(),
            facts=tuple(facts),
            columns=("stage", "per", "before", "after", "change", "95% CI") if rows else (),
            rows=rows,
            notes=self.notes,
        )


def _unnamed(c: Change) -> str:
    """Why a change in the table is not named: `` (within noise)``, `` (under 5%)``."""
    if c.located:
        return ""
    if not c.beyond_noise:
        return " (within noise)"
    return f" (under {fmt_pct(MIN_CHANGE_SHARE)})"


def _signed(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{fmt_pct(abs(x), 1)}"


Measured = Union[Run, LadderLog, SplitLog]
KINDS = {Run: "a run log", LadderLog: "a ladder", SplitLog: "a transform split"}


def as_measured(x: Any, name: str) -> Measured:
    """A run, a ladder or a split: as it is, read from its file (a path), or the record of
    a result (``to_log()``: a ``LadderResult``, a ``TransformSplit``) or of an evaluator
    (``to_run()``)."""
    if isinstance(x, (Run, LadderLog, SplitLog)):
        return x
    if isinstance(x, (str, os.PathLike)):
        return load_log(x)
    to_log = getattr(x, "to_log", None)
    if callable(to_log):
        got = to_log()
        if isinstance(got, (LadderLog, SplitLog)):
            return got
    if callable(getattr(x, "to_run", None)):
        return as_run(x, name)
    raise LoadEvalError(
        f"{name} must be a run, a ladder or a transform split (a LoaderEvaluator, a "
        f"LadderResult, a TransformSplit, or the path of its JSON file), not {a_kind(x)}."
    )


def compare_runs(
    before: Any, after: Any, *, max_slowdown: Any = 0.05, stage: Optional[str] = None
) -> Comparison:
    """Compare ``after`` with ``before``: two runs (run logs, runs or evaluators), two
    ladders or two transform splits (results, or the paths of their saved JSON); see the
    module docstring. ``max_slowdown`` is a share (``0.05`` or ``"5%"``); ``stage`` names the
    one stage the gate looks at (a run's ``wait``/``compute``/``h2d``, a rung such as
    ``real``, a transform step such as ``RandomResizedCrop``).

    Raises :class:`LoadEvalError` for a bad share, two measurements of different kinds,
    or a ``stage`` that both do not have (the message names those they have)."""
    share = parse_share(max_slowdown)
    b, a = as_measured(before, "before"), as_measured(after, "after")
    if type(b) is not type(a):
        raise LoadEvalError(
            f"before is {KINDS[type(b)]} and after {KINDS[type(a)]}; compare two of a kind "
            "(two run logs, two ladders or two transform splits)."
        )
    if isinstance(b, LadderLog) and isinstance(a, LadderLog):
        result = _ladders(b, a, share)
    elif isinstance(b, SplitLog) and isinstance(a, SplitLog):
        result = _splits(b, a, share)
    else:
        assert isinstance(b, Run) and isinstance(a, Run)
        result = _runs(b, a, share)
    if stage is None:
        return result
    return dataclasses.replace(result, stage=_stage_named(result, stage))


def _stage_named(result: Comparison, stage: Any) -> str:
    names = [c.name for c in result.changes]
    if isinstance(stage, str):
        if stage in names:
            return stage
        folded = [n for n in names if n.casefold() == stage.strip().casefold()]
        if len(folded) == 1:
            return folded[0]
    if not names:
        raise OptionError(
            "stage",
            f" {stage!r} cannot be gated on: these {result.kind} have no stages both measured "
            "(two real runs, two ladders or two transform splits have); leave it out.",
        )
    raise OptionError(
        "stage",
        f" {stage!r} is not a stage both {result.kind} measured; name one of {', '.join(names)}.",
    )


def _whole(b: Run, a: Run, share: float, **more: Any) -> Comparison:
    """The comparison of two runs' whole steps; ``more`` sets the other fields."""
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
    return Comparison(
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
        **more,
    )


def _runs(b: Run, a: Run, share: float) -> Comparison:
    notes = []
    if b.mode != a.mode:
        sides = {"log": "a real run (log mode)", "replay": "an ideal run (replay mode)"}
        notes.append(
            f"before is {sides.get(b.mode, b.mode)} and after {sides.get(a.mode, a.mode)}: "
            "this compares the real loader with the ideal one, not a change of your code; "
            "compare two real runs"
        )
    whole = describe_steady([b])["mean_s"]
    return _whole(b, a, share, notes=tuple(notes), changes=tuple(run_changes(b, a, whole)))


def _ladders(b: LadderLog, a: LadderLog, share: float) -> Comparison:
    ran_b = {r.name: r.run for r in b.rungs if r.run is not None and r.error is None}
    both = [r for r in a.rungs if r.run is not None and r.error is None and r.name in ran_b]
    if not both:
        raise LoadEvalError(
            "the two ladders have no rung that ran in both; compare ladders of the same "
            "loop and loader."
        )
    last = both[-1]  # the least cached: the real loader, when it ran
    run_b, run_a = ran_b[last.name], last.run
    assert run_b is not None and run_a is not None
    changes, notes = ladder_changes(b, a, describe_steady([run_b])["mean_s"])
    if b.transforms is not None and a.transforms is not None:
        more, split_notes = split_changes(b.transforms, a.transforms)
        changes += more
        notes += split_notes
    elif (b.transforms is None) != (a.transforms is None):
        notes.append("only one ladder has a split by transform step: its steps are not compared.")
    return _whole(
        run_b,
        run_a,
        share,
        kind="ladders",
        whole=last.name,
        changes=tuple(changes),
        notes=tuple(notes),
    )


def _splits(b: SplitLog, a: SplitLog, share: float) -> Comparison:
    changes, notes = split_changes(b, a)
    mb, ma = b.per_sample_s, a.per_sample_s
    enough = b.samples >= MIN_STEADY_STEPS and a.samples >= MIN_STEADY_STEPS and mb and ma
    return Comparison(
        before_step_s=mb,
        after_step_s=ma,
        ratio=ma / mb if enough and ma and mb else None,
        ratio_ci=split_whole_ci(b, a) if enough else (None, None),
        before_samples_per_s=None,
        after_samples_per_s=None,
        max_slowdown=share,
        before_steps=b.samples,
        after_steps=a.samples,
        notes=tuple(notes),
        kind="transform splits",
        unit="sample",
        changes=tuple(changes),
    )
