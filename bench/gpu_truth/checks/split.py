"""``split``: a real step split into input wait, host-to-device copies and compute. Large
pageable copies (uint8 images sent as float32): the tool's copy time per step against CUDA
events around the same copies (+-10 %), in log mode and in the interleaved pair; its wait
and step against a stopwatch; wait + copy + compute add up to the step (+-10 %)."""

from __future__ import annotations

from statistics import median
from typing import Any

import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator, RunSettings, diagnose, run_pair

from ..harness import Ctx, Spans, hand_steps, now
from ..maths import abba, mean, ms, steady
from ..report import Record, fmt_value, rel, same
from ..workloads import ConvNet, Repeat, SleepyCollate, Trainer, images


def _by_epoch(run: Any, values: list[int]) -> list[float]:
    """The mean of ``values`` (ns) over each epoch's steady steps, in seconds."""
    out: dict[int, list[int]] = {}
    for k in run.steady_indices():
        out.setdefault(run.block[k], []).append(values[k])
    return [sum(v) / len(v) / 1e9 for v in out.values() if v]


def check(ctx: Ctx) -> list[Record]:
    batch, res = ctx.pick(64, 64, 4), ctx.pick(224, 224, 32)
    steps, warmup, wait_s = ctx.pick(60, 30, 10), 3, 0.004
    dev = ctx.dev
    # uint8 images, 4 ms of collation sleep a batch, no workers: a known wait in next()
    loader = DataLoader(
        Repeat(images(8, res), batch * (steps + 2)),
        batch_size=batch,
        collate_fn=SleepyCollate(wait_s),
    )
    train = Trainer(ConvNet(*ctx.pick((32, 2), (32, 2), (4, 1))).to(dev))
    train(torch.zeros(batch, 3, res, res, device=dev)).item()  # cuDNN picks its kernels now

    def body(b: torch.Tensor) -> None:
        x = b.float()  # on the host, on purpose: four times the bytes to copy
        x = x.to(dev)  # pageable: the copy the tool must time
        loss = train(x)
        # reading the loss every step (as a logger does) makes wait, copy and compute run
        # one after another, so that they must add up to the step
        loss.item()

    convert: list[float] = []
    after: list[float] = []
    frees: list[float] = []
    copies = Spans(ctx.cuda)

    def timed_body(b: torch.Tensor) -> None:  # body, with stopwatches and CUDA events
        t0 = now()
        x = b.float()
        convert.append((now() - t0) / 1e9)
        copies.begin()
        y = x.to(dev)  # the copy alone: the events close before ``x`` is let go, whose
        copies.end()  # unmapping (a few ms for 37 MiB) is the step's, not the copy's
        t1 = now()
        del x
        train(y).item()
        after.append((now() - t1) / 1e9)

    ev = LoaderEvaluator(loader, mode="log", steps=steps, warmup=warmup)
    hand_step: list[float] = []  # a mean a hand pass
    hand_wait: list[float] = []
    passes = ctx.pick(4, 2, 1)
    for side in abba(passes):  # tool, hand, hand, tool, tool, hand, hand, tool
        if side == "A":
            for b in ev:
                body(b)
        else:
            s, w = hand_steps(ctx, loader, timed_body, steps, frees)
            hand_step.append(mean(steady(s, warmup)))
            hand_wait.append(mean(steady(w, warmup)))
    # one pass in a few runs 15-25 % slower in next() alone, whichever side it is (a probe
    # of 20 passes on an H200): the figures are medians of the passes' means
    run = ev.to_run()
    tool_step = median(_by_epoch(run, run.step_ns))
    tool_wait = median(_by_epoch(run, run.wait_ns or []))
    # per hand pass, drop its warm-up steps from the per-step parts too
    keep = [i for p in range(passes) for i in range(p * steps + max(warmup, 1), (p + 1) * steps)]
    copy_s = copies.seconds()
    hand_copy = mean(copy_s[i] for i in keep)
    # the rest of a step by hand: the conversion, then from the copy's end to the loss read
    # back (the source's unmapping, the compute), and letting the previous batch go
    hand_rest = mean(convert[i] + after[i] + frees[i] for i in keep)
    ideal = LoaderEvaluator(
        loader,
        mode="replay",
        num_cached_batches=4,
        cache_on=ctx.cache_on(),
        steps=steps,
        warmup=warmup,
    )
    for b in ideal:
        body(b)
    d = diagnose(ev, ideal)
    # the interleaved pair (the default of run_pair, the magic and the command): its real
    # steps' copies, timed by the same events, on a loader long enough to interleave (two
    # blocks of at least 8 steps a side)
    pair_steps = max(steps, 20)
    pair_loader = DataLoader(
        Repeat(images(8, res), batch * (3 * pair_steps + 4 * warmup + 8)),
        batch_size=batch,
        collate_fn=SleepyCollate(wait_s),
    )

    def run_once(batches) -> None:
        for b in batches:
            body(b)

    settings = RunSettings(
        steps=pair_steps,
        warmup=warmup,
        num_cached_batches=4,
        cache_on=ctx.cache_on(),
        sample_interval_s=None,
    )
    pair = run_pair(pair_loader, run_once, settings)
    if not pair.ok or pair.diagnosis is None:
        raise RuntimeError(f"the interleaved pair failed: {pair.error!r}")
    pd = pair.diagnosis
    sequential = [n for n in pd.notes if "then its ideal run" in n]
    parts = None
    if d.real_wait_s is not None and d.real_h2d_s is not None and hand_rest is not None:
        parts = d.real_wait_s + d.real_h2d_s + hand_rest
    size = f"{batch} x 3 x {res}^2 float32 = {batch * 3 * res * res * 4 / 2**20:.1f} MiB"
    return [
        ctx.gpu_only(
            rel(
                "split",
                f"host-to-device copy per step ({size}, pageable)",
                ms(d.real_h2d_s),
                ms(hand_copy),
                0.10,
                "ms",
                "tool: Diagnosis.real_h2d_s; truth: CUDA events around the same copies "
                "(the call alone: freeing its source is not the copy)",
            ),
            "the tool times copies with CUDA events",
        ),
        rel(
            "split",
            "input wait per step (next())",
            ms(tool_wait),
            ms(median(hand_wait)),
            0.10,
            "ms",
            f"{ms(wait_s):.0f} ms of it is the collate_fn's sleep; medians of {passes} passes' "
            "means a side",
        ),
        rel(
            "split",
            "real step",
            ms(tool_step),
            ms(median(hand_step)),
            0.05,
            "ms",
            f"medians of {passes} passes' means a side",
        ),
        same(
            "split",
            "the pair ran interleaved",
            "sequential" if sequential else "interleaved",
            "interleaved",
            not sequential,
            "one pass, blocks A B B A",
            "; ".join(sequential),
        ),
        ctx.gpu_only(
            rel(
                "split",
                "interleaved pair: host-to-device copy per real step",
                ms(pd.real_h2d_s),
                ms(hand_copy),
                0.10,
                "ms",
                "tool: the pair's Diagnosis.real_h2d_s; truth: CUDA events around the same "
                f"copies; the pair's real step {fmt_value(ms(pd.real_step_s), 'ms')}",
            ),
            "the tool times copies with CUDA events",
        ),
        ctx.gpu_only(
            rel(
                "split",
                "wait + copy (tool) + compute and the rest (by hand) vs the tool's step",
                ms(parts),
                ms(d.real_step_s),
                0.10,
                "ms",
                f"by hand: conversion, unmapping, compute = {fmt_value(ms(hand_rest), 'ms')}",
            ),
            "no copy time without CUDA",
        ),
        ctx.gpu_only(
            same(
                "split",
                "the verdict names the copies",
                "host-to-device copies" in str(d),
                True,
                "host-to-device copies" in str(d),
                "in the report",
            ),
            "no copy time without CUDA",
        ),
    ]
