"""``jpeg``: the tool on the job its GPU users run. A few thousand JPEG files made here with
PIL (sides of 160-512 px), read, decoded and augmented in DataLoader workers (a
RandomResizedCrop to 224, a flip, colour jitter, normalisation: torchvision's where it is
installed), feeding a ResNet-18-like network in bf16 mixed precision. For each worker
count (4, 8 and 16 on the card's machine; 1 and 2 in a dry run), against the same loop
timed by hand (the live loader, and its batches cached on the device; before the pair and
after it, the hand loops taken in turn):

* the pair's real and ideal step (+-10 %), its speedup (+-15 %) and its verdict;
* the contended arm's split: the wait for data against ``next()`` timed by hand (+-25 %);
* ``--try num_workers=N`` (the next count; the last tries the one before) against the
  changed loader's own stopwatch (+-15 %);
* the simulator's prediction from the fewest workers' pair for the other counts, against
  the real step measured with them (+-25 %);
* once, on the fewest workers: the ladder's largest stage and costliest transform step
  against the steps timed by hand, one sample at a time on one thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Optional

import torch
from torch.utils.data import DataLoader

from loadeval_nb import RunSettings, run_ladder, run_pair
from loadeval_nb.errors import LoadEvalError
from loadeval_nb.whatif import predict_from_runs

from ..harness import Ctx, hand_device_loop, hand_split, hand_steps, ladder_records
from ..jpegs import AmpTrainer, JpegFiles, ResNet, augment, make_jpegs
from ..maths import expected_verdict, mean, ms, steady, verdict_agrees
from ..report import Record, fmt_value, rel, same

CHECK = "jpeg"


def counts(ctx: Ctx) -> tuple[int, ...]:
    """The worker counts measured: 4, 8 and 16 where the machine has the cores (a card's
    machine has 16), 1 and 2 in a dry run."""
    cores = len(os.sched_getaffinity(0))
    full = tuple(w for w in (4, 8, 16) if w <= max(4, cores))
    return ctx.pick(full, full, (1, 2))


def check(ctx: Ctx) -> list[Record]:
    files = ctx.pick(3000, 2000, 48)
    sides = ctx.pick((160, 512), (160, 512), (40, 72))
    size, batch = ctx.pick(224, 224, 32), ctx.pick(64, 64, 4)
    steps, warmup, cache = ctx.pick(60, 40, 40), ctx.pick(10, 8, 4), ctx.pick(4, 3, 2)
    transform, whose = augment(size)
    # an epoch of 8 x steps batches: the pass's four arms (real, ideal, contended, variant)
    # fit in it, the files cycled
    ds = JpegFiles(make_jpegs(ctx.tmp / "jpegs", files, sides), transform, batch * steps * 8)
    width, blocks = ctx.pick((64, (2, 2, 2, 2)), (64, (2, 2, 2, 2)), (8, (1, 1)))
    train = AmpTrainer(ResNet(width, blocks), ctx.dev, batch)
    train(torch.zeros(batch, 3, size, size))  # cuDNN picks its kernels before any timing

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            train(x)

    def loader_of(workers: int) -> DataLoader:
        return DataLoader(
            ds, batch_size=batch, shuffle=True, num_workers=workers, pin_memory=ctx.cuda,
            drop_last=True,
        )  # fmt: skip

    def hand_real(workers: int) -> tuple[list[float], list[float]]:
        step, wait = hand_steps(ctx, loader_of(workers), train, steps)
        return steady(step, warmup), steady(wait, warmup)

    def hand_ideal(workers: int) -> list[float]:
        return steady(hand_device_loop(ctx, loader_of(workers), train, steps, cache)[0], warmup)

    ws = counts(ctx)
    recs: list[Record] = [
        same(CHECK, "pipeline", f"{files} JPEGs, {whose}", "made and read", True, "runs",
             f"sides {sides[0]}-{sides[1]} px, crop {size}, batch {batch}"),
    ]  # fmt: skip
    real_by_hand: dict[int, list[float]] = {}
    predicted: dict[int, Optional[float]] = {}
    no_prediction = ""
    for k, w in enumerate(ws):
        other = ws[k + 1] if k + 1 < len(ws) else ws[k - 1]
        settings = RunSettings(
            steps=steps, warmup=warmup, num_cached_batches=cache, cache_on=ctx.cache_on(),
            contention=True, variants=(f"num_workers={other}",),
        )  # fmt: skip
        # the truths before the pair and after it, in turn: the real loop, its device cache
        real_a, wait_a = hand_real(w)
        ideal_a = hand_ideal(w)
        pair = run_pair(loader_of(w), run_once, settings)
        if not pair.ok or pair.diagnosis is None:
            raise RuntimeError(f"the pair at {w} workers failed: {pair.error!r}")
        d = pair.diagnosis
        ideal_b = hand_ideal(w)
        real_b, wait_b = hand_real(w)
        changed, _ = hand_real(other)  # the variant's loader, by its own stopwatch
        real_s, ideal_s = mean(real_a + real_b), mean(ideal_a + ideal_b)
        wait_s = mean(wait_a + wait_b)
        real_by_hand.setdefault(w, []).extend(real_a + real_b)
        real_by_hand.setdefault(other, []).extend(changed)
        hand = real_s / ideal_s if real_s and ideal_s else None
        tag = f"{w} workers"
        ci = f"95% CI {fmt_value(d.speedup_ci[0])}-{fmt_value(d.speedup_ci[1])}"
        recs += [
            rel(CHECK, f"{tag}: real step", ms(d.real_step_s), ms(real_s), 0.10, "ms"),
            rel(CHECK, f"{tag}: ideal step", ms(d.ideal_step_s), ms(ideal_s), 0.10, "ms"),
            rel(CHECK, f"{tag}: speedup with an ideal loader", d.speedup, hand, 0.15, "x", ci),
            same(CHECK, f"{tag}: verdict", d.verdict, expected_verdict(hand),
                 verdict_agrees(d.verdict, hand), "as the hand speedup calls for"),
            _split(tag, d, wait_s, real_s, ideal_s),
            _tried(tag, d, other, real_s, mean(changed)),
        ]  # fmt: skip
        if k == 0:  # the fewest workers: the simulator's word on the others, and the ladder
            try:
                p = predict_from_runs(pair.real, pair.ideal) if pair.real and pair.ideal else None
            except LoadEvalError as e:  # (a machine too busy to predict says so)
                p, no_prediction = None, str(e)
            else:
                no_prediction = "the simulator made no prediction"
            for o in ws[1:]:
                predicted[o] = 1 / p.result(o).steps_per_s if p is not None else None
            recs += _ladder(ctx, loader_of(w), run_once, settings, ideal_s, batch, w)
    for o, step_s in predicted.items():
        truth = mean(real_by_hand.get(o, []))
        note = "predicted from the fewest workers' pair" if step_s else no_prediction
        recs.append(
            rel(CHECK, f"simulator from {ws[0]} workers: real step with {o}", ms(step_s),
                ms(truth), 0.25, "ms", note),
        )  # fmt: skip
    return recs


def _split(tag: str, d: Any, wait_s: Optional[float], real_s, ideal_s) -> Record:
    """The contended arm's wait for data against next() timed by hand (+-25 %; where the
    hand wait is under 2 % of the step, both within 2 % of the step of zero)."""
    note = (
        f"CPU taken by loading {fmt_value(ms(d.contention_s), 'ms')}; by hand, real - ideal "
        f"- wait = {fmt_value(ms((real_s or 0) - (ideal_s or 0) - (wait_s or 0)), 'ms')}"
    )
    if wait_s is not None and real_s and wait_s < 0.02 * real_s:
        small = d.waiting_s is not None and abs(d.waiting_s) < 0.02 * real_s
        return same(CHECK, f"{tag}: waiting for data (contended arm)",
                    fmt_value(ms(d.waiting_s), "ms"), fmt_value(ms(wait_s), "ms"), small,
                    "both under 2 % of the step", note)  # fmt: skip
    return rel(CHECK, f"{tag}: waiting for data (contended arm)", ms(d.waiting_s), ms(wait_s),
               0.25, "ms", note)  # fmt: skip


def _tried(tag: str, d: Any, other: int, real_s, changed_s) -> Record:
    """``--try num_workers=other`` against the changed loader's stopwatch: real over changed."""
    t = d.tried
    truth = real_s / changed_s if real_s and changed_s else None
    ci = f"95% CI {fmt_value(t.speedup_ci[0])}-{fmt_value(t.speedup_ci[1])}" if t else ""
    return rel(CHECK, f"{tag}: --try num_workers={other}", t.speedup if t else None, truth,
               0.15, "x", ci)  # fmt: skip


def _ladder(ctx, dl, run_once, settings, ideal_s, batch, workers) -> list[Record]:
    """The ladder's largest stage and costliest transform step against the steps timed by
    hand (decoding included, the file read counted in the loading), one sample at a time on
    one thread."""
    ladder = run_ladder(dl, run_once, replace(settings, variants=()))
    if not ladder.ok:
        raise RuntimeError(f"the ladder failed: {ladder.error!r}")
    ds = dl.dataset
    per = hand_split(ds.transform.transforms, ds.raw, ctx.pick(64, 32, 8), read="read")
    return ladder_records(CHECK, ladder, per, "read", batch, workers, ideal_s)
