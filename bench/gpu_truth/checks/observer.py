"""``observer``: no observer effect on CUDA. Log mode on a ~5 ms CUDA step that reads its
result back (so that the host cannot hide a cost by running ahead): step time within 0.1 %
of the bare loop (interleaved ABBA blocks, ratio of medians); no synchronise per step
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
    recs = [
        Record(
            "observer",
            "step time, log mode vs the bare loop (medians of blocks)",
            ms(logged / n),
            ms(bare / n),
            logged / bare <= 1.001,
            "ratio <= 1.001",
            "ms",
            f"log mode adds {100 * (logged / bare - 1):+.3f} %; {pairs} ABBA pairs of {n}-step "
            f"blocks of a ~{ms(work.step_s):.1f} ms step; spread of the bare blocks "
            f"{100 * spread:.3f} %",
        )
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
            1,
            "",
            "the one allowed: the epoch's closing synchronise",
        ),
        at_most(
            "observer",
            f"CUDA synchronise calls inside {len(marks)} profiled steps",
            len(inside),
            0,
            "",
            f"profiler: {', '.join(seen) or 'none'} in the whole profile",
        ),
    ]
