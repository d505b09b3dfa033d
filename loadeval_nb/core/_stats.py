"""Statistics on step times: summaries and a block-bootstrap interval on the speedup."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike


def describe(step_s: Sequence[float], samples: Optional[Sequence[Optional[int]]] = None) -> dict:
    """Mean, median, p90, min, max (seconds) and throughput of a set of steps.

    ``samples_per_s`` is total samples / total time (None when sample counts are unknown);
    ``steps_per_s`` is 1 / mean.
    """
    a = np.asarray(step_s, dtype=float)
    n = int(a.size)
    out: dict = {
        "n": n,
        "mean_s": None,
        "median_s": None,
        "p90_s": None,
        "min_s": None,
        "max_s": None,
        "std_s": None,
        "total_s": None,
        "steps_per_s": None,
        "samples_per_s": None,
    }
    if n == 0:
        return out
    total = float(a.sum())
    out.update(
        mean_s=float(a.mean()),
        median_s=float(np.median(a)),
        p90_s=float(np.percentile(a, 90)),
        min_s=float(a.min()),
        max_s=float(a.max()),
        std_s=float(a.std(ddof=1)) if n > 1 else 0.0,
        total_s=total,
        steps_per_s=(n / total) if total > 0 else None,
    )
    if (
        samples is not None
        and len(samples) == n
        and all(s is not None for s in samples)
        and total > 0
    ):
        out["samples_per_s"] = float(sum(samples)) / total  # type: ignore[arg-type]
    return out


def block_length(n: int) -> int:
    """Block length for the moving-block bootstrap: about n^(1/3), at least 1.

    Step times are autocorrelated (an input-bound loop with W workers stalls
    every W steps), so resampling single steps would understate the spread.
    """
    return max(1, int(round(n ** (1 / 3))) + 1) if n > 1 else 1


_CHUNK = 1 << 21
"""Block starts drawn at once: memory stays O(steps) however many resamples."""


def _block_means(a: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_boot`` moving-block resamples of ``a``, from prefix sums: each block's
    sum is two lookups, and the draws go in chunks, so neither memory nor time holds a
    resample index per step (a million-step run takes well under a second)."""
    n = a.size
    b = min(block_length(n), n)
    n_blocks = math.ceil(n / b)
    tail = n - (n_blocks - 1) * b  # the last block is cut to what is left of n
    cs = np.concatenate(([0.0], np.cumsum(a, dtype=float)))
    out = np.empty(n_boot)
    rows = max(1, _CHUNK // n_blocks)
    for r0 in range(0, n_boot, rows):
        k = min(rows, n_boot - r0)
        starts = rng.integers(0, n - b + 1, size=(k, n_blocks))
        full = cs[starts[:, :-1] + b] - cs[starts[:, :-1]]
        last = cs[starts[:, -1] + tail] - cs[starts[:, -1]]
        out[r0 : r0 + k] = (full.sum(axis=1) + last) / n
    return out


def bootstrap_ratio_ci(
    num: Sequence[float],
    den: Sequence[float],
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[Optional[float], Optional[float]]:
    """Percentile interval of ``mean(num) / mean(den)`` by moving-block bootstrap.

    The two series are resampled independently (they come from separate runs).
    Deterministic for a given ``seed``. Returns ``(None, None)`` for empty input.
    """
    a = np.asarray(num, dtype=float)
    b = np.asarray(den, dtype=float)
    if a.size == 0 or b.size == 0:
        return None, None
    rng = np.random.default_rng(seed)
    ma = _block_means(a, n_boot, rng)
    mb = _block_means(b, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ma / mb
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return None, None
    lo, hi = np.percentile(ratios, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def bootstrap_mean_ci(
    x: Sequence[float], *, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[Optional[float], Optional[float]]:
    """Percentile interval of ``mean(x)`` by moving-block bootstrap (for a series of
    paired differences, whose steps are autocorrelated like the steps themselves)."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return None, None
    means = _block_means(a, n_boot, np.random.default_rng(seed))
    lo, hi = np.percentile(means, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def bootstrap_diff_ci(
    plus: Sequence[Sequence[float]],
    minus: Sequence[Sequence[float]],
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[Optional[float], Optional[float]]:
    """Percentile interval of ``sum(mean(x) for x in plus) - sum(mean(x) for x in minus)``
    by moving-block bootstrap, each series resampled on its own (they come from separate
    runs): a change of one run's mean (``plus=[after], minus=[before]``), or of a stage
    that is the difference of two runs. ``(None, None)`` when a series is empty."""
    series = [(1.0, np.asarray(x, dtype=float)) for x in plus]
    series += [(-1.0, np.asarray(x, dtype=float)) for x in minus]
    if not series or any(a.size == 0 for _, a in series):
        return None, None
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for sign, a in series:
        total += sign * _block_means(a, n_boot, rng)
    lo, hi = np.percentile(total, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


DISAGREE_Z = 2.5758
"""Two blocks of one measurement disagree when their means are this many standard errors
apart (a 99 % two-sided test) ..."""
DISAGREE_REL = 0.03
"""... and by this share of the faster at least (a difference too small to matter is not
a disagreement, however many steps pin it down)."""


def blocks_disagree(blocks: Sequence[Sequence[float]]) -> bool:
    """Whether the blocks (step times of the same thing measured at different times)
    differ by more than their steps' noise: the slowest and fastest block means more than
    ``DISAGREE_Z`` standard errors and ``DISAGREE_REL`` apart. Blocks of fewer than two
    steps are left out; fewer than two blocks never disagree."""
    stats = []
    for b in blocks:
        if len(b) >= 2:
            m = sum(b) / len(b)
            var = sum((x - m) ** 2 for x in b) / (len(b) - 1)
            stats.append((m, var / len(b)))
    if len(stats) < 2:
        return False
    lo, hi = min(stats), max(stats)
    if lo[0] <= 0 or hi[0] / lo[0] - 1 <= DISAGREE_REL:
        return False
    se = (lo[1] + hi[1]) ** 0.5
    return se == 0 or (hi[0] - lo[0]) / se > DISAGREE_Z


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified
    Lentz's method), which converges for ``x < (a + 1) / (a + b + 2)``."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _beta_reg(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function at ``t`` for ``df`` degrees of freedom."""
    tail = 0.5 * _beta_reg(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=512)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile: the ``t`` with ``t_cdf(t, df) == p`` (to 1e-12), at every
    degree of freedom (a table with 2.0 beyond it made intervals from 12-20 repeats
    4-9 % too narrow)."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, not p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def t975(df: int) -> float:
    """Student's t, 97.5th percentile, for ``df`` degrees of freedom (exact: :func:`t_quantile`;
    below one degree of freedom no interval can be had: infinity)."""
    return t_quantile(0.975, df) if df >= 1 else math.inf


SEGMENT_STEPS = 8
"""Fewest steps in a segment of a run cut in time (fewer and a segment's mean is mostly
noise)."""
MAX_SEGMENTS = 8
"""Segments per run at most."""
MIN_SEGMENTS = 3
"""Fewest segments per run that show a trend."""


def _segments(start_s: np.ndarray, step_s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` consecutive segments of a run: the mean start time and the log of the mean
    step of each."""
    parts = np.array_split(np.arange(step_s.size), k)
    t = np.array([start_s[p].mean() for p in parts])
    y = np.array([math.log(step_s[p].mean()) for p in parts])
    return t, y


def drift_slope(
    runs: Sequence[tuple[ArrayLike, ArrayLike]],
) -> Optional[tuple[float, float, int]]:
    """The drift shared by runs measured one after the other: each run (its steps' start
    times and step times, seconds) is cut into segments in time, and the log of the
    segments' mean step is fitted against their time, with an intercept per run and one
    slope. Returns ``(slope, its standard error, degrees of freedom)``, the slope in log
    units per second; None when a run has too few steps for ``MIN_SEGMENTS`` segments."""
    arrays = [(np.asarray(t, dtype=float), np.asarray(x, dtype=float)) for t, x in runs]
    k = min(MAX_SEGMENTS, min(x.size for _, x in arrays) // SEGMENT_STEPS)
    if k < MIN_SEGMENTS or any(np.any(x <= 0) for _, x in arrays):
        return None
    ts, ys = [], []
    for t, x in arrays:
        st, sy = _segments(t, x, k)
        ts.append(st - st.mean())
        ys.append(sy - sy.mean())
    tc, yc = np.concatenate(ts), np.concatenate(ys)
    sxx = float((tc * tc).sum())
    if sxx <= 0:
        return None
    slope = float((tc * yc).sum()) / sxx
    df = tc.size - len(arrays) - 1
    resid = yc - slope * tc
    if df <= 0:
        return None
    s2 = float((resid * resid).sum()) / df
    return slope, math.sqrt(s2 / sxx), df
