"""The claim and its interval: the speedup of a real run over an ideal one, the terms
that widen its interval (each measured from the runs: the steps' bootstrap, the blocks'
t-interval, a drift within runs one after the other, what changes between two processes,
the gap in other processes' load between the sides, the method's floor), and the label
the interval supports. See ``docs/verdict.md`` ("The confidence interval")."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .._format import fmt_pct
from .._stats import bootstrap_ratio_ci, drift_slope, t975
from ..record.run import DEFAULT_STEPS, Run
from .diagnosis import (
    CI_LEVEL,
    INPUT_BOUND,
    LARGE,
    MIN_STEADY_STEPS,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    WORTH,
)


def _gain(x: float) -> str:
    """``1.09`` → "9%"; ``0.97`` → "-3%" (the speed a speedup adds)."""
    return fmt_pct(x - 1.0) if x >= 1.0 else f"-{fmt_pct(1.0 - x)}"


def _verdict(
    n_real: int,
    n_ideal: int,
    headroom: Optional[float],
    ci: tuple[Optional[float], Optional[float]],
) -> tuple[str, str]:
    """The label and its reason, decided from the interval against the two lines (never
    from the point estimate): NOT INPUT-BOUND only when the whole interval is under the
    first, INPUT-BOUND only when it is over the second, PARTLY when it is over the first;
    an interval across the first line is NOT ENOUGH DATA, its range said in words."""
    if n_real < MIN_STEADY_STEPS or n_ideal < MIN_STEADY_STEPS:
        return NOT_ENOUGH_DATA, (
            f"only {min(n_real, n_ideal)} steady steps in one run; at least {MIN_STEADY_STEPS} "
            "are needed"
        )
    lo, hi = ci
    if headroom is None or lo is None or hi is None:
        return NOT_ENOUGH_DATA, (
            "the steps took no measurable time, so there is no speed to compare (check the "
            "clock, or that the loop does its work inside the steps)"
        )
    between = f"between {lo:.2f}× and {hi:.2f}× as fast"
    if hi < WORTH:
        if hi < 1.0:  # the interval wholly below 1: never "as fast"
            return NOT_INPUT_BOUND, (
                "the real loader measured faster than an ideal one, which is noise or a "
                "difference in the batches (the cached ones cost more than the average real "
                "one), not a gain to be had from loading"
            )
        return NOT_INPUT_BOUND, (
            f"an ideal loader would make steps {between}: at most {_gain(hi)} faster, under "
            f"the {_gain(WORTH)} a change is worth"
        )
    if lo >= LARGE:
        least = f": at least {_gain(lo)}" if lo < 2.0 else ""  # (2× and more: the range says it)
        return INPUT_BOUND, f"an ideal loader would make steps {between}{least}"
    if lo >= WORTH:
        more = "; possibly much more" if hi >= LARGE else ""
        return PARTLY_INPUT_BOUND, (
            f"an ideal loader would make steps {between}: at least {_gain(lo)}{more}"
        )
    if hi < LARGE:
        return NOT_ENOUGH_DATA, (
            f"an ideal loader would make steps {between}: at most {_gain(hi)} faster, but "
            f"whether by the {_gain(WORTH)} a change is worth cannot be told from these steps"
        )
    return NOT_ENOUGH_DATA, (
        f"an ideal loader would make steps {between}: too wide a range to tell whether "
        "loading holds training back"
    )


def steps_to_tell(
    n: int, ci: tuple[Optional[float], Optional[float]], fixed: float = 0.0
) -> Optional[int]:
    """About how many steady steps (or blocks) a side would put an interval that lies
    across a line on one side of it (:data:`WORTH`, or :data:`LARGE` when it lies across
    that one alone), where its width beyond ``fixed`` shrinks as one over the square root
    of the steps: ``fixed`` is the share either side that no number of steps narrows (the
    method's floor, the gap in other processes' load between the sides, the share between
    two processes). None when the interval lies across no line, when the fixed share alone
    reaches the line, or when a gain that close to the line would take more than
    :data:`MAX_TELL` times the steps."""
    lo, hi = ci
    if lo is None or hi is None or n <= 0 or hi <= lo:
        return None
    if lo < WORTH <= hi:
        line = WORTH
    elif lo < LARGE <= hi:
        line = LARGE
    else:
        return None
    mid, half = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / 2
    gap = abs(mid - math.log(line))
    if gap <= math.log1p(max(fixed, 0.0)):
        return None
    # the interval is the union of the steps' (which shrinks) and the fixed share's (which
    # does not, and is under the gap): the steps' must come down to the gap
    times = (half / gap) ** 2
    if times > MAX_TELL:
        return None
    return int(math.ceil(n * times * 1.2))


def told(r: Run, i: Run, width: float) -> bool:
    """For a pair measured in blocks that goes on until it can tell (``steps="auto"``):
    whether the blocks so far settle it: their t-interval, with every term the verdict
    adds (the gap in other processes' load, neighbours that agree, the method's floor),
    gives a label other than NOT ENOUGH DATA and is no wider than ``width`` (``hi / lo - 1``).

    The steps' bootstrap is left out (it is the verdict's, and costs a resampling per
    check); where the blocks are at least :data:`MIN_T_BLOCKS` it is the narrower part."""
    repeats = between_repeats(r, i)
    if repeats is None or len(repeats[0]) < MIN_T_BLOCKS:
        return False
    ratios, ci = repeats
    speedup = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    lo, hi = _widen(r, i, speedup, ci, repeats).ci
    if lo is None or hi is None or lo <= 0:
        return False
    label, _ = _verdict(MIN_STEADY_STEPS, MIN_STEADY_STEPS, 1.0 - 1.0 / speedup, (lo, hi))
    return label != NOT_ENOUGH_DATA and hi / lo - 1.0 <= width


MAX_TELL = 16.0
"""More than this many times the steps measured to tell a gain from its line: the gain
is too close to the line to place, and the verdict says so instead of a number."""


@dataclass
class _Claim:
    """The speedup, its interval, and the label the interval supports."""

    speedup: Optional[float]
    headroom: Optional[float]
    terms: _Interval
    ci_label: str
    repeats: Optional[tuple[list[float], tuple[float, float]]]
    blocks: Any
    """The pass's plan as its run log keeps it (``settings.interleaved``), or None."""
    unit: str
    on_epochs: bool
    verdict: str
    reason: str


def _claim(
    r: Run,
    i: Run,
    rs: list[float],
    is_: list[float],
    real_mean: Optional[float],
    ideal_mean: Optional[float],
    seed: int,
) -> _Claim:
    """The speedup of ``r`` over ``i``, its interval (the steps' bootstrap, the blocks' or
    repeats' spread, and every term :func:`_widen` adds) and the verdict it supports."""
    speedup = headroom = None
    ci: tuple[Optional[float], Optional[float]] = (None, None)
    if real_mean and ideal_mean:
        speedup = real_mean / ideal_mean
        headroom = 1.0 - ideal_mean / real_mean
        if min(len(rs), len(is_)) >= MIN_STEADY_STEPS:  # (fewer: an interval of nothing,
            ci = bootstrap_ratio_ci(rs, is_, level=CI_LEVEL, seed=seed)  # 2.10–2.10×)
    blocks = r.plan
    unit = "block" if r.method == "blocks" else "epoch"
    ci_label = f"{CI_LEVEL:.0%} CI"
    repeats = between_repeats(r, i)
    if repeats is not None and ci[0] is not None and ci[1] is not None:
        ratios, (blo, bhi) = repeats
        ci = (min(ci[0], blo), max(ci[1], bhi))  # the spread between repeats counts too
        if len(ratios) < MIN_T_BLOCKS:
            ci_label = f"range of {len(ratios)} {unit}s"
    terms = _widen(r, i, speedup, ci, repeats)
    verdict, reason = _verdict(len(rs), len(is_), headroom, terms.ci)
    on_epochs = r.method == "epochs"
    return _Claim(
        speedup, headroom, terms, ci_label, repeats, blocks, unit, on_epochs, verdict, reason
    )


def _to_tell(
    r: Run, k: _Claim, n_real: int, n_ideal: int, spe: Optional[int]
) -> tuple[Optional[int], Optional[int]]:
    """The steps a side (and, on the loop's epochs, the epochs a side) that would narrow
    an interval across a line; (None, None) where more steps would not tell."""
    if k.verdict not in (NOT_ENOUGH_DATA, PARTLY_INPUT_BOUND):
        return None, None
    ci, fixed = k.terms.ci, k.terms.fixed
    if k.on_epochs and k.repeats is not None and spe:
        # the pair's blocks are the loop's epochs: whole epochs a side, each spe steps
        epochs = steps_to_tell(len(k.repeats[0]), ci, fixed)
        if epochs is None:
            return None, None
        epochs = max(epochs, len(k.repeats[0]) + 1)
        if epochs * spe == DEFAULT_STEPS:  # (the default pairs 4 a side)
            epochs += 1
        return epochs * spe, epochs
    tell = steps_to_tell(min(n_real, n_ideal), ci, fixed)
    return (int(math.ceil((r.warmup + tell) / 50) * 50) if tell is not None else None), None


BUSY_SHARE = 0.2
"""Other processes using this share of the machine's cores (and half a core at least)
during a run make it disturbed."""


MIN_T_BLOCKS = 3
"""Fewest block (or epoch) speedups a t-interval is taken from: with two, Student's t of
one degree of freedom (12.7) makes an interval of nothing (1.12× and 1.40× give
0.31–5.15×), so two blocks give their own range instead."""


DRIFT_MIN = 0.01
"""A drift between two runs measured one after the other counts when it moves the
speedup by this share at least (and is beyond the noise of the runs' segments)."""


def epoch_means(run: Run) -> dict[int, float]:
    """Mean steady step of each epoch that has steady steps (seconds), by epoch."""
    return {e: sum(v) / len(v) for e, v in run.steady_by_block().items()}


@dataclass
class _Interval:
    """The speedup's interval and the terms that widened it beyond the steps' (and the
    blocks') own spread."""

    ci: tuple[Optional[float], Optional[float]]
    drift: Optional[tuple[float, float, float]] = None
    """One run after the other, a drift within them: :func:`sequential_drift`."""
    load: Optional[LoadGap] = None
    """A busy machine: the gap in other processes' load between the sides
    (:func:`load_gap`)."""
    apart: Optional[tuple[float, Optional[float]]] = None
    """One run after the other: :func:`between_runs` (the share, the cores taken)."""

    @property
    def fixed(self) -> float:
        """The share either side that no number of steps narrows: the method's floor, the
        gap in other processes' load between the sides, what changes between two runs."""
        return max(
            METHOD_FLOOR,
            self.load.share if self.load else 0.0,
            self.apart[0] if self.apart else 0.0,
        )


def _widen(
    r: Run,
    i: Run,
    speedup: Optional[float],
    ci: tuple[Optional[float], Optional[float]],
    repeats: Optional[tuple[list[float], tuple[float, float]]],
) -> _Interval:
    """Every term that widens the speedup's interval ``ci`` (the steps' bootstrap, united
    with the blocks' or repeats' t-interval), in one place, each where its design calls
    for it and each measured from the runs: a drift within runs measured one after the
    other, what changes between two processes, the gap in other processes' load between
    the sides on a busy machine, and the method's floor under every interval."""
    out = _Interval(ci)
    if ci[0] is None or ci[1] is None or not speedup:
        return out
    lo, hi, mid = ci[0], ci[1], speedup

    def around(share: float) -> None:
        nonlocal lo, hi
        lo, hi = min(lo, mid / (1 + share)), max(hi, mid * (1 + share))

    if repeats is not None:
        # blocks (or repeats) in one process share the machine's state: other processes'
        # load, measured on each side, biases the speedup only where the sides saw
        # different loads, by as much as that gap could do (a bias: both ends move)
        out.load = load_gap(r, i)
        if out.load is not None:
            lo, hi = lo / (1 + out.load.share), hi * (1 + out.load.share)
    else:
        # one run after the other: a drift within the runs is a drift between them too
        out.drift = sequential_drift(r, i)
        if out.drift is not None:
            lo, hi = min(lo, lo * out.drift[1]), max(hi, hi * out.drift[2])
        # and what changed between them (a second process's start, memory and threads,
        # the clock; on a busy machine, the state each run's process landed in: a loop
        # at a full core in one run and sharing one with another process in the next,
        # as far as the cores other processes took allow) is in the difference, beyond
        # what either run can see
        out.apart = between_runs(r, i)
        around(out.apart[0])
    # the method's own error against a stopwatch of the same loop, quiet: never a
    # narrower claim than that (bench/coverage.py)
    around(METHOD_FLOOR)
    out.ci = (lo, hi)
    return out


@dataclass(frozen=True)
class LoadGap:
    """The gap in other processes' load between the two sides of a pair on a busy
    machine, measured by the CPU sampler on each side (:func:`load_gap`)."""

    cores: float
    """Other processes' mean load during the real side less theirs during the ideal side
    (cores; positive: the real side saw more)."""
    error: float
    """That gap's 95 % sampling error (cores): the sampler's readings vary tick by tick."""
    share: float
    """The share either way the speedup is held to for it: ``(|cores| + error) / cpus``."""
    cpus: int


def load_gap(r: Run, i: Run) -> Optional[LoadGap]:
    """On a busy machine (:func:`busy_cores` on either side): the gap in other processes'
    load between the sides and what it could do to the speedup; None on a quiet machine
    or without two readings a side.

    Other processes' CPU (``other_pct``, one reading per sampler tick) is averaged over
    each side's ticks. Under a fair scheduler a side's step time can grow with other
    processes' load by at most ``d(load) / cpus`` in log terms (its threads' share of
    ``cpus`` falls from at most ``cpus / (own + load)``), so a gap of ``g`` cores between
    the sides moves their ratio by at most ``g / cpus`` either way: the interval holds the
    speedup that much either side, with the gap's own 95 % sampling error added. A load
    that lands on both sides alike (a process spinning throughout) is no gap: its effect
    is in both sides' steps, the same in the measurement as in the training it stands
    for, and in the blocks' spread."""
    if busy_cores(r) is None and busy_cores(i) is None:
        return None
    sides = []
    for run in (r, i):
        cpu = (run.util or {}).get("cpu") or {}
        v = [x / 100 for x in cpu.get("other_pct") or [] if x is not None]
        if len(v) < 2:
            return None
        sides.append(np.asarray(v, dtype=float))
    a, b = sides
    gap = float(a.mean() - b.mean())
    error = 1.96 * math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    cpus = _cores(r)
    return LoadGap(gap, error, (abs(gap) + error) / cpus, cpus)


def between_repeats(r: Run, i: Run) -> Optional[tuple[list[float], tuple[float, float]]]:
    """For a pair measured in blocks or repeats (one epoch of each side per block): the
    speedup of each block and an interval of their geometric mean: a 95 % t-interval from
    ``MIN_T_BLOCKS`` blocks on, the blocks' own range below; None with fewer than two.

    On a busy machine the load moves the loop's speed between states that outlast a block
    (a step of 3.5 or 5.2 ms by turns, its process at a full core either way: the sibling
    hyperthread's, the caches'), so neighbouring blocks agree more than blocks apart: the
    t-interval counts the blocks as the fewer independent ones their lag-one correlation
    leaves (:func:`blocks_alike`): their mean's variance is taken over that many."""
    a, b = epoch_means(r), epoch_means(i)
    ratios = [a[e] / b[e] for e in sorted(set(a) & set(b)) if a[e] > 0 and b[e] > 0]
    if len(ratios) < 2:
        return None
    if len(ratios) < MIN_T_BLOCKS:
        return ratios, (min(ratios), max(ratios))
    logs = [math.log(x) for x in ratios]
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((v - m) ** 2 for v in logs) / (len(logs) - 1))
    n = len(logs)
    worth = float(n)
    if busy_cores(r) is not None or busy_cores(i) is not None:
        worth = blocks_alike(logs) or worth
    # (the blocks' variance scaled to the fewer independent ones; the degrees of freedom
    # stay the blocks': a t of one degree for two spells would be an interval of nothing)
    half = t975(n - 1) * sd / math.sqrt(worth)
    return ratios, (math.exp(m - half), math.exp(m + half))


ALIKE_MIN = 6
"""Fewest blocks whose lag-one correlation :func:`blocks_alike` estimates."""
ALIKE_MAX = 0.8
"""The lag-one correlation :func:`blocks_alike` takes at most (a few blocks estimate it
roughly; beyond this the blocks would count as under a ninth of their number)."""


def blocks_alike(logs: list[float]) -> Optional[float]:
    """How many independent blocks ``logs`` (the blocks' log speedups, in time order) are
    worth when neighbours agree: ``n (1 - rho) / (1 + rho)`` for their lag-one
    correlation ``rho`` (an AR(1) series' effective sample size; ``rho`` at most
    :data:`ALIKE_MAX`, two blocks at least); None where they do not agree (``rho <= 0``)
    or there are fewer than :data:`ALIKE_MIN` (three neighbour pairs estimate ``rho`` to
    ±0.5: noise that would only widen)."""
    n = len(logs)
    if n < ALIKE_MIN:
        return None
    m = sum(logs) / n
    d = [v - m for v in logs]
    var = sum(x * x for x in d)
    if var <= 0:
        return None
    rho = sum(d[k] * d[k + 1] for k in range(n - 1)) / var
    if rho <= 0:
        return None
    rho = min(rho, ALIKE_MAX)
    return max(2.0, n * (1 - rho) / (1 + rho))


def sequential_drift(r: Run, i: Run) -> Optional[tuple[float, float, float]]:
    """For a pair measured one run after the other: how a drift within the runs moves
    their speedup, as factors ``(estimate, low, high)`` on it; None when the runs show no
    drift beyond the noise of their segments, or one under ``DRIFT_MIN``.

    Each run's steady steps are cut into segments in time and one slope is fitted to the
    log of the segments' means (:func:`drift_slope`); the runs are taken to be back to back,
    so the ideal run's middle comes the real run's second half and the ideal run's first
    half after the real run's middle. A drift seen within the runs over that time is
    between them too: the speedup corrected for it is ``exp(slope × gap)`` times the
    measured one, give or take the slope's 95 % interval."""
    sides = []
    for run in (r, i):
        idx = run.steady_indices()
        if not idx:
            return None
        start = np.asarray(run.start_ns, dtype=float)[idx] / 1e9
        step = np.asarray(run.step_ns, dtype=float)[idx] / 1e9
        sides.append((start, step))
    fit = drift_slope(sides)
    if fit is None:
        return None
    slope, se, df = fit
    (rstart, rstep), (istart, istep) = sides
    r_mid, i_mid = float((rstart + rstep / 2).mean()), float((istart + istep / 2).mean())
    r_end = (r.start_ns[-1] + r.step_ns[-1]) / 1e9
    gap = (r_end - r_mid) + (i_mid - i.start_ns[0] / 1e9)
    t = t975(df)
    if gap <= 0 or abs(slope) <= t * se or abs(math.expm1(slope * gap)) < DRIFT_MIN:
        return None
    half = t * se * gap
    return math.exp(slope * gap), math.exp(slope * gap - half), math.exp(slope * gap + half)


BETWEEN_RUNS = 0.10
"""How far the speedup of two runs of one loop measured one after the other may be off
on a quiet machine, beyond each run's own noise and drift (a second process's start,
memory and threads; the machine's clock): the sequential pair's interval holds the
speedup give or take this share (``bench/coverage.py``: the short-epoch workload,
measured in two processes)."""


METHOD_FLOOR = 0.02
"""The interval is never narrower than the speedup give or take this share: on a quiet
machine the tool's reading of a loop and a stopwatch's of the same loop in one process
differ by up to 2 % beyond the steps' noise (``bench/coverage.py``: the blocks' edges,
the cached batches' cost, the sampler's thread)."""


def _cores(run: Run) -> int:
    return int(run.environment.get("cpu_count") or os.cpu_count() or 1)


def between_runs(r: Run, i: Run) -> tuple[float, Optional[float]]:
    """For a pair measured one run after the other: the share the interval is widened by
    either way (:data:`BETWEEN_RUNS` where the runs were two processes, and the share of
    the machine's cores other processes took during the busier run: measured, it bounds
    how far a run's process can have landed in another state than the other's — on two
    cores, one taken, a single-threaded loop at a full core in one run can share a core
    in the next, 0.90× for a 1.4× on ``bench/coverage.py``'s ``input-seq``), and those
    cores when they make the machine busy (:func:`busy_cores`; None when it was
    quiet)."""
    cores = _cores(r)
    other = [x for x in (r.mean_cpu_pct("other_pct"), i.mean_cpu_pct("other_pct")) if x]
    worst = max(other) / 100 if other else 0.0
    busy = max(busy_cores(r) or 0.0, busy_cores(i) or 0.0) or None
    return (BETWEEN_RUNS if two_processes(r, i) else 0.0) + worst / cores, busy


def two_processes(r: Run, i: Run) -> bool:
    """Whether the two runs were measured in two processes (their logs' ``pid``s)."""
    a, b = r.environment.get("pid"), i.environment.get("pid")
    return isinstance(a, int) and isinstance(b, int) and a != b


def busy_cores(run: Run) -> Optional[float]:
    """The cores other processes took during ``run``, when that makes the machine busy
    (:data:`BUSY_SHARE` of its cores, and half a core at least); None otherwise."""
    other = run.mean_cpu_pct("other_pct")
    cores = _cores(run)
    if other is None or other < 50 or other / 100 < BUSY_SHARE * cores:
        return None
    return other / 100


def loader_limited(r: Run) -> Optional[tuple[int, int]]:
    """``(steps asked, the loader's batches)`` when the loader's epoch, not the steps asked,
    limited what the real run measured; None otherwise."""
    settings = r.settings or {}
    asked, got = settings.get("steps"), r.steps_per_epoch()
    if not isinstance(asked, int) or not got or r.status != "complete":
        return None
    plan = r.plan
    if plan is not None:
        # the loader's epoch as the plan knew it (its len()); a block is no epoch: a loader
        # without len() limits nothing
        got = plan.get("epoch_seen") or plan.get("epoch") or (r.loader_settings or {}).get("len")
        if not isinstance(got, int) or isinstance(got, bool) or got <= 0:
            return None
        if plan.get("epoch_limited") is True:  # the plan's own word (a loader that ran
            return (asked, got)  # out, with no len() to plan by, is told below)
        # one pass serves both sides: the cache fill, then each side's steady steps
        cached = settings.get("num_cached_batches")
        first = max(r.warmup, cached if isinstance(cached, int) else 0, 1)
        need = first + 2 * max(asked - r.warmup, 0)
        return (asked, got) if got < need else None
    return (asked, got) if got < asked else None


BLOCKS_DISAGREE_REL = 0.10
"""Blocks of a pair whose speedups differ by less than this never disagree, whatever
their noise (block to block, the steps after a change of side differ a little)."""


Z99 = 2.3263
"""The standard normal's 99th percentile."""


def blocks_disagree(r: Run, i: Run) -> Optional[tuple[float, float]]:
    """The lowest and highest speedup of the blocks (or epochs) of a pair whose blocks
    disagree by more than their steps' noise allows (Cochran's Q over the blocks' log
    speedups against a chi-square 99th percentile) and by ``BLOCKS_DISAGREE_REL`` at
    least; None when they agree or there are fewer than three."""
    a, b = _epoch_stats(r), _epoch_stats(i)
    keys = [e for e in sorted(set(a) & set(b)) if a[e][0] > 0 and b[e][0] > 0]
    if len(keys) < 3:
        return None
    xs, ws = [], []
    for e in keys:
        (ma, va, na), (mb, vb, nb) = a[e], b[e]
        var = va / (na * ma * ma) + vb / (nb * mb * mb)
        if var <= 0:
            return None  # steps of no spread (a fake clock): nothing to weigh them by
        xs.append(math.log(ma / mb))
        ws.append(1.0 / var)
    mean = sum(w * x for w, x in zip(ws, xs)) / sum(ws)
    q = sum(w * (x - mean) ** 2 for w, x in zip(ws, xs))
    df = len(xs) - 1
    # Wilson and Hilferty's chi-square quantile
    limit = df * (1 - 2 / (9 * df) + Z99 * math.sqrt(2 / (9 * df))) ** 3
    # a spread of a few per cent between blocks is what the first steps after a change of
    # side leave (a queue drained, workers catching up): not worth a note by itself
    if q <= limit or max(xs) - min(xs) < math.log(1 + BLOCKS_DISAGREE_REL):
        return None
    return math.exp(min(xs)), math.exp(max(xs))


def _epoch_stats(run: Run) -> dict[int, tuple[float, float, int]]:
    """Mean, variance and count of each epoch's steady steps (two or more)."""
    out = {}
    for e, v in run.steady_by_block().items():
        if len(v) >= 2:
            m = sum(v) / len(v)
            out[e] = (m, sum((x - m) ** 2 for x in v) / (len(v) - 1), len(v))
    return out


def busy_load(run: Run) -> Optional[str]:
    """What other work took of the machine during ``run``, in words (``1.0 of 2 cores in
    other processes``, ``other processes' work on the GPU (up to 2 at a time)``), where it
    made the machine busy; None otherwise."""
    procs = [
        n for n in ((run.util or {}).get("gpu") or {}).get("other_procs") or [] if n is not None
    ]
    if procs and sum(1 for n in procs if n > 0) >= 0.3 * len(procs):
        return f"other processes' work on the GPU (up to {max(procs)} at a time)"
    other = busy_cores(run)
    if other is None:
        return None
    return f"{other:.1f} of {_cores(run)} cores in other processes"
