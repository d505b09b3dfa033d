"""``observer``: no observer effect on CUDA. Log mode's host cost a step (an empty loop
through it against the bare loop, 200 000 steps: nanoseconds, which block timing cannot
resolve) at most 0.1 % of a ~5 ms CUDA step; on that step, which reads its result back (so
that the host cannot hide a cost by running ahead), no cost above 0.1 % seen in interleaved
ABBA blocks (the 95 % interval of the pairs' ratios: the blocks' own spread is about 1 %);
no synchronise per step, only where the steady steps begin and at the epoch's end
(``torch.cuda.synchronize`` counted; the CUDA runtime's calls in ``torch.profiler``)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

import torch

from loadeval_nb import LoaderEvaluator

from ..harness import Ctx, now
from ..maths import abba, ms
from ..report import Record, at_most
from ..workloads import MatmulWork

SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")


def block_seconds(source: Iterable[Any], n: int, work: MatmulWork) -> float:
    """Wall time from the first step's start to the last one's end. Each step reads a value
    back (as a loss logger does), so the host cannot run ahead of the GPU and anything the
    tool adds to a step lands in the step's time; a GPU-bound loop whose host runs ahead
    would hide it. The epoch's opening and closing (the tool's closing synchronise, the
    sampler's pause) stay outside: they are once an epoch, not once a step."""
    t0 = t1 = 0
    for i, x in enumerate(source):
        if i == 0:
            t0 = now()
        work(x)
        work.read()
        if i == n - 1:
            t1 = now()
    return (t1 - t0) / 1e9


T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
"""Student's t (two-sided 95 %) by degrees of freedom; 2.0 beyond 9 (within 5 % from 19)."""


def mean_ci(xs: list[float]) -> tuple[float, float, float]:
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, m, m
    half = T95.get(len(xs) - 1, 2.0) * statistics.stdev(xs) / len(xs) ** 0.5
    return m, m - half, m + half


def per_step_host_ns(n: int) -> tuple[float, float]:
    """What log mode adds to a step on the host, resolved where block timing cannot: the
    same empty loop over ``n`` items, bare and through log mode (samplers on, as a user runs
    it), three times each, interleaved; medians in nanoseconds a step (bare, log)."""
    src = list(range(n))
    bare: list[float] = []
    logged: list[float] = []
    for _ in range(3):
        t0 = now()
        for _x in src:
            pass
        bare.append((now() - t0) / n)
        ev = LoaderEvaluator(src, mode="log")
        t0 = now()
        for _x in ev:
            pass
        logged.append((now() - t0) / n)
    return statistics.median(bare), statistics.median(logged)


def check(ctx: Ctx) -> list[Record]:
    work = MatmulWork(ctx, 0.005)
    n, pairs = ctx.pick(100, 60, 10), ctx.pick(20, 10, 3)
    src = list(range(n))
    ev = LoaderEvaluator(src, mode="log")  # samplers on, as a user runs it
    block_seconds(src, n, work)  # warm-up
    times: dict[str, list[float]] = {"A": [], "B": []}
    for side in abba(pairs):  # A: the bare loop, B: the same loop through log mode
        times[side].append(block_seconds(src if side == "A" else ev, n, work))
    bare, logged = statistics.median(times["A"]), statistics.median(times["B"])
    spread = statistics.pstdev(times["A"]) / bare if len(times["A"]) > 1 else 0.0
    # block i of each side comes from the same A B / B A pair: their ratios, and an interval
    added, lo, hi = mean_ci([b / a - 1 for a, b in zip(times["A"], times["B"])])
    bare_ns, log_ns = per_step_host_ns(ctx.pick(200_000, 200_000, 2_000))
    share = (log_ns - bare_ns) / (work.step_s * 1e9)
    recs = [
        Record(
            "observer",
            "log mode's host cost a step, as a share of the step",
            100 * share,
            0.1,
            share <= 0.001,
            "<= 0.1 %",
            "%",
            f"{log_ns - bare_ns:.0f} ns a step (empty loop: {log_ns:.0f} ns through log mode, "
            f"{bare_ns:.0f} ns bare) against a ~{ms(work.step_s):.1f} ms step",
        ),
        Record(
            "observer",
            "step time, log mode vs the bare loop (medians of blocks)",
            ms(logged / n),
            ms(bare / n),
            lo <= 0.001,
            "no cost above 0.1 % seen (95 % CI of the pairs' ratios)",
            "ms",
            f"log mode adds {100 * added:+.3f} % (95 % CI {100 * lo:+.3f} to {100 * hi:+.3f} %); "
            f"{pairs} ABBA pairs of {n}-step blocks of a ~{ms(work.step_s):.1f} ms step; spread "
            f"of the bare blocks {100 * spread:.3f} %: the host cost above resolves finer",
        ),
    ]
    recs += sync_counts(ctx, work)
    return recs


def on_host(event: Any) -> bool:
    """A profiler event the host ran (``DeviceType.CPU``), not its copy on the GPU."""
    return str(getattr(event, "device_type", "CPU")).endswith("CPU")


def sync_counts(ctx: Ctx, work: MatmulWork) -> list[Record]:
    n = ctx.pick(200, 100, 10)
    host = [torch.randn(64, 1024) for _ in range(4)]
    if ctx.cuda:
        host = [h.pin_memory() for h in host]
    source = [host[i % 4] for i in range(n)]

    def body(x: torch.Tensor) -> None:  # a copy each step, so copy timing is on the path
        x.to(ctx.dev, non_blocking=True)
        work()

    # 1. torch.cuda.synchronize, counted by wrapping it while one log-mode epoch runs
    calls = 0
    real_sync = torch.cuda.synchronize

    def counting(*a: Any, **k: Any) -> Any:
        nonlocal calls
        calls += 1
        return real_sync(*a, **k)

    ev = LoaderEvaluator(source, mode="log")
    torch.cuda.synchronize = counting
    try:
        for x in ev:
            body(x)
    finally:
        torch.cuda.synchronize = real_sync
    # 2. the profiler: CUDA runtime synchronise calls between the first step and the last
    from torch.profiler import ProfilerActivity, profile, record_function

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    ev2 = LoaderEvaluator(source[: ctx.pick(50, 30, 5)], mode="log")
    with profile(activities=acts) as prof:
        for x in ev2:
            with record_function("gpu_truth_step"):
                body(x)
    events = prof.events()
    # the steps as the host ran them: with CUDA on, the profiler also shows each range on the
    # GPU's timeline, which ends later and would take in the epoch's closing synchronise
    marks = [e.time_range for e in events if e.name == "gpu_truth_step" and on_host(e)]
    lo, hi = min(r.start for r in marks), max(r.end for r in marks)
    inside = [e for e in events if e.name in SYNC_CALLS and lo <= e.time_range.start <= hi]
    seen = sorted({e.name for e in events if e.name in SYNC_CALLS})
    return [
        at_most(
            "observer",
            f"torch.cuda.synchronize calls in a {n}-step log epoch",
            calls,
            2,
            "",
            "the two allowed: where the steady steps begin (the warm-up's queued work) "
            "and the epoch's closing synchronise",
        ),
        at_most(
            "observer",
            f"CUDA synchronise calls inside {len(marks)} profiled steps",
            len(inside),
            1,
            "",
            f"none per step, the one where the steady steps begin; profiler: "
            f"{', '.join(seen) or 'none'} in the whole profile",
        ),
    ]
