"""The arithmetic the checks share: steady steps, ABBA order, windows of readings, the
verdict a hand-timed speedup calls for, pytest's closing line. No torch, no GPU."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Optional

from loadeval_nb.verdict import INPUT_BOUND, NOT_INPUT_BOUND, PARTLY_INPUT_BOUND


def ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * 1e3


def mean(xs: Iterable[float]) -> Optional[float]:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def steady(values: Sequence[float], warmup: int) -> list[float]:
    """Drop the first max(warmup, 1) values: the tool never counts an epoch's first step."""
    return list(values[max(warmup, 1) :])


def abba(pairs: int) -> list[str]:
    """A, B, B, A, A, B, ...: drift (clocks, heat, other load) lands on both sides alike."""
    return [x for i in range(pairs) for x in (("A", "B") if i % 2 == 0 else ("B", "A"))]


def ratio_of_medians(b: Sequence[float], a: Sequence[float]) -> Optional[float]:
    if not a or not b:
        return None
    return statistics.median(b) / statistics.median(a)


def window_mean(
    times: Sequence[float], values: Sequence[Optional[float]], windows: Sequence[tuple]
) -> tuple[Optional[float], int]:
    """Mean of the readings stamped inside any of the (lo, hi) windows, and their count."""
    picked = [
        v
        for t, v in zip(times, values)
        if v is not None and any(lo <= t <= hi for lo, hi in windows)
    ]
    return mean(picked), len(picked)


def steady_windows(
    start_ns: Sequence[int],
    step_ns: Sequence[int],
    epoch: Sequence[int],
    steady_idx: Iterable[int],
    origin_ns: int,
    settle_ns: int,
) -> list[tuple[int, int]]:
    """Per epoch, the clock span of its steady steps, less ``settle_ns`` at the start (NVML
    averages over its own period, up to a second: early readings still hold the idle time
    before the epoch)."""
    spans: dict[int, list[int]] = {}
    for i in steady_idx:
        lo, hi = spans.setdefault(epoch[i], [start_ns[i], start_ns[i] + step_ns[i]])
        spans[epoch[i]] = [min(lo, start_ns[i]), max(hi, start_ns[i] + step_ns[i])]
    return [
        (origin_ns + lo + settle_ns, origin_ns + hi)
        for lo, hi in spans.values()
        if hi - lo > settle_ns
    ]


def expected_verdict(speedup: Optional[float]) -> Optional[str]:
    """The verdict a hand-timed speedup calls for (docs/verdict.md: headroom 20 % and 5 %)."""
    if speedup is None:
        return None
    if speedup >= 1.25:
        return INPUT_BOUND
    return PARTLY_INPUT_BOUND if speedup >= 1 / (1 - 0.05) else NOT_INPUT_BOUND


def verdict_agrees(verdict: Optional[str], hand_speedup: Optional[float]) -> bool:
    """The tool's verdict is the one the hand speedup calls for; within 5 % of a threshold
    (1.25x, 1.053x) either neighbour is accepted, since noise decides there."""
    if verdict is None or hand_speedup is None:
        return False
    ok = {expected_verdict(hand_speedup * f) for f in (0.95, 1.0, 1.05)}
    return verdict in ok


def pytest_counts(output: str) -> dict[str, int]:
    """``3 passed, 1 skipped in 2.0s`` -> {"passed": 3, "skipped": 1}."""
    tail = "\n".join(output.strip().splitlines()[-3:])
    counts: dict[str, int] = {}
    for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail):
        counts[kind.rstrip("s") if kind.startswith("error") else kind] = int(n)
    return counts
