"""Where two measurements differ: the stage that changed, by how much, with an interval.

Each kind of measurement is cut into the stages it has, and each stage's time before is
set against its time after:

* two **runs** (real loader, log mode): waiting for the next batch (inside ``next()``),
  the rest of the step (the step's own work), and the host-to-device copy where CUDA
  events timed it; a step each, block-bootstrap intervals over the steady steps;
* two **ladders**: the measured rung at the top (its whole step: compute) and each rung's
  stage over the measured rung above it (a difference of two runs' mean steps, so the
  change of a stage is a sum of four means: its interval is a block bootstrap of the
  four); a step each; and the split by transform step when both ladders have one;
* two **transform splits**: each step's own time a sample, with a t-interval from the
  per-sample spread the split keeps (each sample's time, squared, summed).

A change is *located* (named in the report) when its 95 % interval leaves out 0 and it is
at least :data:`MIN_CHANGE_SHARE` of the whole step (or sample) before: noise, and
changes too small to matter, are never named.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .._format import fmt_pct, fmt_seconds
from .._stats import bootstrap_diff_ci, t975
from ..record.ladderlog import LadderLog, PartLog, SplitLog
from ..record.run import Run
from .diagnosis import PARTLY_HEADROOM

__all__ = ["MIN_CHANGE_SHARE", "Change"]

MIN_CHANGE_SHARE = PARTLY_HEADROOM
"""A change smaller than this share of the whole step (or sample) before is never named,
however narrow its interval (the same 5 % as a ladder's stage and the verdict's PARTLY
INPUT-BOUND)."""
RUN_PARTS = {
    "wait": "waiting for the next batch",
    "compute": "the rest of the step",
    "h2d": "host-to-device copy",
}
"""A run's stages: ``wait`` and ``compute`` add up to the step; ``h2d`` is the copy's own
time on the GPU (part of ``compute``, and it may overlap it)."""


@dataclass(frozen=True)
class Change:
    """One stage before and after: a part of the step (runs), a rung's stage (ladders),
    a transform step (splits). Seconds a ``unit`` (``step`` or ``sample``)."""

    name: str
    """What ``compare_runs(stage=...)`` and ``--stage`` call it: ``wait``, a rung
    (``real``), a transform step (``RandomResizedCrop``)."""
    what: str
    """The stage in words (``per-sample loading and transforms``)."""
    unit: str
    before_s: float
    after_s: float
    ci_s: tuple[Optional[float], Optional[float]]
    """95 % interval of ``after_s - before_s`` (None: not enough to tell)."""
    whole_s: Optional[float]
    """The whole step (or sample) before: what :attr:`share` is a share of."""

    @property
    def delta_s(self) -> float:
        return self.after_s - self.before_s

    @property
    def share(self) -> Optional[float]:
        """The change as a share of the whole step (or sample) before."""
        return self.delta_s / self.whole_s if self.whole_s else None

    @property
    def beyond_noise(self) -> bool:
        """Its interval leaves out 0."""
        lo, hi = self.ci_s
        return lo is not None and hi is not None and (lo > 0 or hi < 0)

    @property
    def located(self) -> bool:
        """Beyond noise and at least :data:`MIN_CHANGE_SHARE` of the whole: named."""
        share = self.share
        return self.beyond_noise and share is not None and abs(share) >= MIN_CHANGE_SHARE

    @property
    def label(self) -> str:
        return self.name if self.what in ("", self.name) else f"{self.name} ({self.what})"

    def line(self) -> str:
        """``"RandomResizedCrop +3.0 ms a sample (95% CI +2.8 ms to +3.2 ms), +60.1% of
        the sample"``."""
        lo, hi = self.ci_s
        ci = (
            f" (95% CI {signed_s(lo)} to {signed_s(hi)})"
            if lo is not None and hi is not None
            else " (no interval: too few measurements)"
        )
        share = self.share
        of = f", {signed_pct(share)} of the {self.unit}" if share is not None else ""
        return f"{self.label} {signed_s(self.delta_s)} a {self.unit}{ci}{of}"


def signed_s(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{fmt_seconds(abs(x))}"


def signed_pct(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{fmt_pct(abs(x), 1)}"


def _mean(x: Sequence[float]) -> float:
    return float(np.mean(x))


# ---- two runs ---------------------------------------------------------------------------


def step_parts(run: Run) -> dict[str, list[float]]:
    """A real run's steady steps cut into :data:`RUN_PARTS` (seconds a step); empty for a
    run that did not time its waits (an ideal run: replay)."""
    if run.wait_ns is None:
        return {}
    idx = run.steady_indices()
    step = np.asarray(run.step_ns, dtype=float)[idx] / 1e9
    wait = np.asarray(run.wait_ns, dtype=float)[idx] / 1e9
    parts = {"wait": wait.tolist(), "compute": (step - wait).tolist()}
    if run.h2d_ns is not None and idx and all(run.h2d_ns[i] is not None for i in idx):
        parts["h2d"] = [run.h2d_ns[i] / 1e9 for i in idx]  # type: ignore[operator]
    return parts


def run_changes(before: Run, after: Run, whole_s: Optional[float]) -> list[Change]:
    """The stages of two real runs' steps, before and after (see the module)."""
    b, a = step_parts(before), step_parts(after)
    out = []
    for name, what in RUN_PARTS.items():
        if name in b and name in a and b[name] and a[name]:
            ci = bootstrap_diff_ci([a[name]], [b[name]])
            out.append(Change(name, what, "step", _mean(b[name]), _mean(a[name]), ci, whole_s))
    return out


# ---- two ladders ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stage:
    upper: str
    lower: Optional[str]
    what: str
    plus: list[float]
    minus: Optional[list[float]]

    @property
    def mean_s(self) -> float:
        return _mean(self.plus) - (_mean(self.minus) if self.minus else 0.0)


def ladder_stages(log: LadderLog) -> list[_Stage]:
    """The ladder's stages from the rungs that ran: the top one's whole step, then each
    rung over the measured rung above it (skipped rungs between them fold into it)."""
    stages: list[_Stage] = []
    above: Optional[tuple[str, list[float]]] = None
    between: list[str] = []
    for r in log.rungs:
        steps = r.run.steady_step_s() if r.run is not None and r.error is None else []
        if not steps:
            if above is not None and r.adds:
                between.append(r.adds)
            continue
        if above is None:
            what = f"the whole step, {r.title}" if r.title else "the whole step"
            stages.append(_Stage(r.name, None, what, steps, None))
        else:
            what = " + ".join([*between, r.adds or f"{r.name} over {above[0]}"])
            stages.append(_Stage(r.name, above[0], what, steps, above[1]))
        above, between = (r.name, steps), []
    return stages


def ladder_changes(
    before: LadderLog, after: LadderLog, whole_s: Optional[float]
) -> tuple[list[Change], list[str]]:
    """Each stage both ladders measured, before and after; notes for those only one did."""
    b = {s.upper: s for s in ladder_stages(before)}
    out, notes = [], []
    for s in ladder_stages(after):
        old = b.pop(s.upper, None)
        if old is None or old.lower != s.lower:
            notes.append(
                f"the {s.upper} rung's stage is not compared: "
                + (
                    "it was not measured before"
                    if old is None
                    else f"it is over the {old.lower or 'no'} rung before and the "
                    f"{s.lower or 'no'} rung after"
                )
                + " (a rung skipped in one ladder only)."
            )
            continue
        ci = bootstrap_diff_ci(
            [s.plus, *([old.minus] if old.minus else [])],
            [old.plus, *([s.minus] if s.minus else [])],
        )
        out.append(Change(s.upper, s.what, "step", old.mean_s, s.mean_s, ci, whole_s))
    notes += [f"the {name} rung's stage is not compared: it was not measured after." for name in b]
    return out, notes


# ---- two transform splits ---------------------------------------------------------------


def _variance(p: PartLog, n: int) -> Optional[float]:
    """The variance of a sample's time in step ``p`` (a sample that did not call it: 0)."""
    if p.sum_sq_s2 is None or n < 2:
        return None
    m = p.seconds / n
    return max(0.0, (p.sum_sq_s2 - n * m * m) / (n - 1))


def _t_interval(
    d: float, var_b: Optional[float], n_b: int, var_a: Optional[float], n_a: int
) -> tuple[Optional[float], Optional[float]]:
    if var_b is None or var_a is None:
        return None, None
    half = t975(min(n_a, n_b) - 1) * math.sqrt(var_b / n_b + var_a / n_a)
    return d - half, d + half


def split_spread(split: SplitLog) -> Optional[float]:
    """The variance of a whole sample's time: the steps' variances added up (as if the
    steps of one sample varied apart); None when the split kept no spread."""
    vs = [_variance(p, split.samples) for p in split.parts]
    return None if any(v is None for v in vs) else sum(v for v in vs if v is not None)


def split_changes(before: SplitLog, after: SplitLog) -> tuple[list[Change], list[str]]:
    """Each step both splits timed, a sample before and after; notes for those only one
    did, and when a split kept no spread (then no interval, and nothing is named)."""
    nb, na = before.samples, after.samples
    whole = before.per_sample_s
    b = {p.name: p for p in before.parts}
    out, notes = [], []
    for p in after.parts:
        old = b.pop(p.name, None)
        if old is None:
            notes.append(f"{p.name} was timed only after.")
            continue
        if not nb or not na:
            continue
        mb, ma = old.seconds / nb, p.seconds / na
        ci = _t_interval(ma - mb, _variance(old, nb), nb, _variance(p, na), na)
        what = "the rest of the per-sample call" if p.rest else p.name
        out.append(Change(p.name, what, "sample", mb, ma, ci, whole))
    notes += [f"{name} was timed only before." for name in b]
    if any(s.parts and any(p.sum_sq_s2 is None for p in s.parts) for s in (before, after)):
        notes.append(
            "a split kept no per-sample spread (measured by an older loadeval_nb), so its "
            "steps have no interval and none is named; measure it again."
        )
    return out, notes


def split_whole_ci(before: SplitLog, after: SplitLog) -> tuple[Optional[float], Optional[float]]:
    """Interval of the ratio of the two splits' mean sample times (a t-interval on the
    log of the ratio, each side's variance from :func:`split_spread`)."""
    mb, ma = before.per_sample_s, after.per_sample_s
    vb, va = split_spread(before), split_spread(after)
    nb, na = before.samples, after.samples
    if not mb or not ma or vb is None or va is None or nb < 2 or na < 2:
        return None, None
    se = math.sqrt(vb / (nb * mb * mb) + va / (na * ma * ma))
    half = t975(min(na, nb) - 1) * se
    r = ma / mb
    return r * math.exp(-half), r * math.exp(half)
