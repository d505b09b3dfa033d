"""``util``: the NVML utilisation the tool samples (10 Hz) against ``nvidia-smi -lms 100``
running alongside, over the same window, on a busy loop and on a loop starved by a loader
that sleeps: within 5 points."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator

from .. import fake_nvml
from ..harness import Ctx, Spans, now, tool_gpu_reason, tool_gpu_series
from ..maths import window_mean
from ..report import Record, near
from ..smi import Smi, smi_gpu_ids
from ..workloads import MatmulWork, Sleepy


def util_case(ctx: Ctx, what: str, source: Iterable[Any], work: MatmulWork) -> list[Record]:
    busy = Spans(ctx.cuda)  # the GPU time of each step's work: the busy share, for the note
    ev = LoaderEvaluator(source, mode="log", sample_interval_s=0.1)
    ids = smi_gpu_ids() if ctx.cuda else []
    with Smi(ids, stand_in=not ctx.cuda, stand_in_pct=fake_nvml.UTIL_PCT) as smi:
        first = None
        for x in ev:
            first = first or now()
            busy.begin()
            work(x)
            busy.end()
        last = now()  # the tool's epoch end has synchronised: the GPU work is done
    assert first is not None, "the loop ran no step"
    # both series over one window: past the first second (NVML's own averaging period
    # still holds the idle time before the loop), to the loop's end
    settle, tail = ctx.pick((1e9, 0.1e9), (1e9, 0.1e9), (0, 0))  # a dry run's NVML is flat
    windows = [(first + settle, last - tail)]
    busy_pct = 100 * sum(busy.seconds()) / ((last - first) / 1e9)
    smi_mean, n_smi = window_mean(*smi.series(), windows)
    tool = tool_gpu_series(ev)
    if tool is None:
        tool_mean, n_tool = None, 0
        why = f"the tool has no NVML readings ({tool_gpu_reason(ev)}); "
    else:
        (tool_mean, n_tool), why = window_mean(*tool, windows), ""
    note = (
        f"{why}{n_tool} tool readings, {n_smi} nvidia-smi readings over "
        f"{(last - first) / 1e9:.1f} s; GPU busy by CUDA events {busy_pct:.0f} %; "
        f"{smi.describe()}"
    )
    rec = near("util", f"{what}: GPU utilisation (tool, NVML)", tool_mean, smi_mean, 5, note)
    return [ctx.gpu_only(rec, "NVML")]


def check(ctx: Ctx) -> list[Record]:
    work = MatmulWork(ctx, 0.005)
    seconds = ctx.pick(6.0, 3.0, 1.2)
    recs = util_case(ctx, "busy loop", range(int(seconds / work.step_s)), work)
    # starved: the loader sleeps 10 ms an item, the step queues ~5 ms of GPU work and goes
    # back to wait: the GPU is busy about a third to a half of the time
    sleep_s = 0.010
    starved = DataLoader(Sleepy(int(seconds / sleep_s), sleep_s), batch_size=None)
    return recs + util_case(ctx, "starved loop (sleep in the loader)", starved, work)
