"""Run logs -> ColumnDataSource-ready dicts (plain lists; no Bokeh import here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ..core._shared import fmt_seconds
from ..core.record import Run

nan = float("nan")


def decimate(
    x: Sequence[float], y: Sequence[float], max_points: int
) -> tuple[list[float], list[float]]:
    """Keep at most about ``max_points`` points, preserving spikes.

    Splits the series into buckets and keeps each bucket's minimum and maximum,
    in order, so a stall (one slow step in a thousand) stays visible.
    """
    n = len(y)
    if n <= max_points or max_points < 4:
        return _listed(x), _listed(y)
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    buckets = max_points // 2
    edges = np.linspace(0, n, buckets + 1).astype(int)
    firsts, lasts = edges[:-1], edges[1:]
    filled = lasts > firsts
    bucket = np.repeat(np.arange(buckets), lasts - firsts)
    # sorted by bucket, then by value (stable: the first of equal values first), the first
    # of each bucket is its minimum, and by falling value its maximum; a live view draws
    # the whole run at every push, so no Python loop over the buckets
    lows = np.lexsort((ya, bucket))[firsts[filled]]
    highs = np.lexsort((-ya, bucket))[firsts[filled]]
    keep = np.unique(np.concatenate([lows, highs]))
    return xa[keep].tolist(), ya[keep].tolist()


def _listed(v: Sequence[float]) -> list[float]:
    """A plain list of Python numbers (an array's ``tolist``)."""
    return v.tolist() if isinstance(v, np.ndarray) else list(v)


def startup_indices(run: Run) -> list[int]:
    """The steps that start the loader: the run's first, and the first of each later epoch
    that began with a start of its own (``iter()``: worker spawn, the first fetch; an epoch
    whose record shows no set-up time, such as a block of an interleaved pair, did not).
    Each is often ten times a steady step and is left out of the statistics; the charts
    draw it apart so that it does not set their scale."""
    if not run.n_steps:
        return []
    e = np.asarray(run.block)
    firsts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]]).tolist()
    summaries = run.blocks or []

    def started(k: int) -> bool:
        i = int(e[k])
        setup = summaries[i].get("setup_ns") if 0 <= i < len(summaries) else None
        return setup is None or setup > 0

    return firsts[:1] + [k for k in firsts[1:] if started(k)]


def steps_data(run: Run, max_points: int = 20000) -> dict[str, list[Any]]:
    """Step index and step time (ms) of every step but the start-ups (each epoch's first:
    :func:`startup_data`), decimated past ``max_points``."""
    keep = np.ones(run.n_steps, dtype=bool)
    keep[startup_indices(run)] = False
    x = np.flatnonzero(keep)
    y = np.asarray(run.step_ns, dtype=float)[keep] / 1e6
    xs, ys = decimate(x, y, max_points)
    return {"step": xs, "step_ms": ys}


def startup_data(run: Run, name: str) -> dict[str, list[Any]]:
    """The start-up steps of run ``name`` (each epoch's first): step index, time (ms), and
    the label drawn beside each marker (``real first step 1.25 s``)."""
    x = startup_indices(run)
    return startup_rows(name, x, [run.step_ns[k] / 1e6 for k in x])


def startup_rows(name: str, steps: Sequence[int], step_ms: Sequence[float]) -> dict[str, list[Any]]:
    """Rows for a start-up source: step index, time (ms) and the marker's label."""
    return {
        "step": list(steps),
        "step_ms": list(step_ms),
        "text": [f"{name} first step {fmt_seconds(ms / 1e3)}" for ms in step_ms],
    }


def hist_data(runs: Sequence[Run], bins: int = 40) -> list[dict[str, list[float]]]:
    """Histograms of the steady step times (ms) of several runs on shared bins."""
    series = [np.asarray(r.steady_step_s(), dtype=float) * 1e3 for r in runs]
    allv = (
        np.concatenate([s for s in series if s.size])
        if any(s.size for s in series)
        else np.array([])
    )
    if allv.size == 0:
        return [{"left": [], "right": [], "count": []} for _ in runs]
    hi = float(np.percentile(allv, 99.5)) if allv.size > 20 else float(allv.max())
    lo = float(allv.min())
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    out = []
    for s in series:
        counts, _ = np.histogram(np.clip(s, lo, hi), bins=edges)
        out.append(
            {"left": edges[:-1].tolist(), "right": edges[1:].tolist(), "count": counts.tolist()}
        )
    return out


def util_data(run: Run) -> dict[str, Any]:
    """Utilisation series of a run: time (s since run start), GPU % (mean over GPUs), CPU %.

    ``gpu_pct`` is None when the run had no GPU readings.
    """
    util = run.util or {}
    t = [v / 1e9 for v in util.get("t_ns") or []]
    gpu = util.get("gpu") or {}
    per_tick = run.gpu_util_per_tick()
    gpu_pct = None
    if per_tick is not None:  # one value per tick, also for a log whose series disagree
        per_tick = (per_tick + [None] * len(t))[: len(t)]
        gpu_pct = [nan if v is None else v for v in per_tick]
    cpu = util.get("cpu") or {}

    def clean(xs: Optional[list[Optional[float]]]) -> Optional[list[float]]:
        if xs is None:
            return None
        return [nan if v is None else float(v) for v in xs]

    return {
        "t_s": t,
        "gpu_pct": gpu_pct,
        "gpu_reason": gpu.get("reason"),
        "process_cpu_pct": clean(cpu.get("process_pct")),
        "workers_cpu_pct": clean(cpu.get("workers_pct")),
    }
