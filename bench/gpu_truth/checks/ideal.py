"""``ideal``: the ideal is ideal. A ~10 ms CNN step replayed from a device cache keeps NVML
at >= 95 %; a pinned host cache copied with ``non_blocking=True`` is within 5 % of it; with
unpinned float32 batches the ladder's host rung minus its device rung matches the same two
loops timed by hand (+-25 %), and the stage counts when the hand-timed share says so."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator, RunSettings, run_ladder

from ..harness import Ctx, gpu_seconds, hand_device_loop, hand_steps, tool_gpu_series
from ..maths import abba, mean, ms, steady, steady_windows, window_mean
from ..report import Record, at_least, fmt_value, rel, same
from ..workloads import Repeat, Trainer, calibrated_cnn, images


def check(ctx: Ctx) -> list[Record]:
    res = ctx.pick(160, 160, 32)
    train, batch, step_s = calibrated_cnn(ctx, res)
    steps = max(ctx.pick(40, 40, 30), int(ctx.pick(4.0, 2.0, 0.05) / step_s))
    warmup, dev = 5, ctx.dev

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            train(x.to(dev, non_blocking=True))

    # uint8 images, pinned: the copy is ~1 % of the step (becomes floats on the GPU)
    pinned = DataLoader(
        Repeat(images(4 * batch, res), batch * (steps + 8)), batch_size=batch, pin_memory=ctx.cuda
    )
    common = dict(mode="replay", num_cached_batches=4, steps=steps, warmup=warmup)
    if ctx.dry:  # steps of a few ms: read the stand-in NVML often enough to land in them
        common["sample_interval_s"] = 0.01
    on_dev = LoaderEvaluator(pinned, cache_on=ctx.cache_on(), **common)
    on_host = LoaderEvaluator(pinned, cache_on="host", **common)
    for ev in (on_dev, on_host, on_host, on_dev):  # ABBA: drift lands on both
        run_once(ev)
    dev_run, host_run = on_dev.to_run(), on_host.to_run()
    dev_step, host_step = mean(dev_run.steady_step_s()), mean(host_run.steady_step_s())
    recs = []
    tool = tool_gpu_series(on_dev)
    if tool is not None:
        wins = steady_windows(
            dev_run.start_ns,
            dev_run.step_ns,
            dev_run.block,
            dev_run.steady_indices(),
            on_dev.started_ns or 0,
            ctx.pick(int(0.5e9), int(0.5e9), 0),  # a dry run's NVML is flat
        )
        util, n = window_mean(tool[0], tool[1], wins)
        whole = fmt_value(dev_run.mean_gpu_util_pct(), "%")
        note = f"{n} readings over the steady steps; {whole} over the whole run"
    else:
        util, note = None, "no NVML readings"
    shape = f"{batch} x 3 x {res}^2 uint8, {ms(step_s):.1f} ms a step"
    what = f"device-cached ideal: GPU utilisation (NVML; {shape})"
    recs.append(ctx.gpu_only(at_least("ideal", what, util, 95.0, "%", note), "NVML"))
    pinned_cache = bool(on_host.cached_batches) and on_host.cached_batches[0].is_pinned()
    recs.append(
        ctx.gpu_only(
            same(
                "ideal",
                "host cache keeps the loader's pinned memory",
                pinned_cache,
                True,
                pinned_cache,
                "pinned",
            ),
            "pinning needs CUDA",
        )
    )
    recs.append(
        ctx.gpu_only(
            rel(
                "ideal",
                "host-cached step (pinned, non_blocking) vs device-cached step",
                ms(host_step),
                ms(dev_step),
                0.05,
                "ms",
            ),
            "no device cache without CUDA",
        )
    )
    recs += ladder_copy_cost(ctx, train, batch, res, step_s)
    return recs


def ladder_copy_cost(ctx: Ctx, train: Trainer, batch: int, res: int, step_s: float):
    """Unpinned float32 batches: the ladder's host rung minus its device rung against the
    same two loops timed by hand (host batches copied each step; batches already on the
    device). The isolated copy, by CUDA events, is in the note: the added step time can be
    a little less where the staging of a pageable copy overlaps the previous step."""
    steps, warmup, cache, dev = (
        max(ctx.pick(30, 30, 12), int(ctx.pick(3.0, 1.5, 0.05) / step_s)),
        5,
        4,
        ctx.dev,
    )
    floats = DataLoader(
        Repeat(images(4 * batch, res, torch.float32), batch * (steps + 8)), batch_size=batch
    )

    def body(x: torch.Tensor) -> None:
        train(x.to(dev, non_blocking=True))

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            body(x)

    settings = RunSettings(
        steps=steps, warmup=warmup, num_cached_batches=cache, sample_interval_s=None
    )
    ladder = run_ladder(floats, run_once, settings, rungs=("device", "host"), transforms=None)
    if not ladder.ok:
        raise RuntimeError(f"the ladder failed: {ladder.error!r}")
    stage = next((st for st in ladder.stages if st.name == "host"), None)
    # the truths, by hand, ABBA
    it = iter(floats)
    host = [next(it) for _ in range(cache)]
    del it
    hand: dict[str, list[float]] = {"A": [], "B": []}
    for side in abba(2):
        if side == "A":
            s, _ = hand_device_loop(ctx, floats, body, steps, cache)
        else:
            s, _ = hand_steps(ctx, (host[i % cache] for i in range(steps)), body, steps)
        hand[side] += steady(s, warmup)
    hand_dev, hand_host = mean(hand["A"]), mean(hand["B"])
    added_truth = hand_host - hand_dev if hand_host and hand_dev else None
    x = host[0]
    copy_s = gpu_seconds(ctx, lambda: x.to(dev, non_blocking=True))
    share = added_truth / hand_host if added_truth is not None and hand_host else None
    counts_truth = share is not None and share >= 0.05  # the ladder's own 5 % floor
    counted = bool(stage and stage.significant)
    lo, hi = stage.ratio_ci if stage else (None, None)
    mib = batch * 3 * res * res * 4 / 2**20
    note = (
        f"{ladder.conclusion()} Host-rung ratio CI {fmt_value(lo)}-{fmt_value(hi)}; by hand: "
        f"host {fmt_value(ms(hand_host), 'ms')}, device {fmt_value(ms(hand_dev), 'ms')}, the "
        f"{mib:.1f} MiB copy alone {fmt_value(ms(copy_s), 'ms')} (CUDA events)"
    )
    return [
        ctx.gpu_only(
            same(
                "ideal",
                "unpinned float32: the ladder counts the host-to-device stage",
                counted,
                counts_truth,
                counted == counts_truth,
                "as the hand-timed share says (>= 5 % counts)",
                note,
            ),
            "no device rung without CUDA",
        ),
        ctx.gpu_only(
            rel(
                "ideal",
                "unpinned: host rung - device rung vs the same by hand",
                ms(stage.added_s if stage else None),
                ms(added_truth),
                0.25,
                "ms",
            ),
            "no device rung without CUDA",
        ),
    ]
