"""``seed``: the seed study, end to end. A costly CPU image pipeline (1024x1024 images:
crop, mask dilation, colour conversion, scale; 4 workers): the pair's verdict and speedup
against hand-timed real and device-cached loops taken before and after it (+-15 %), the ladder's stage and costliest
transform against hand timings; after the fix (256x256 images, a small dilation) the
verdict turns."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.utils.data import DataLoader

from loadeval_nb import RunSettings, run_ladder, run_pair
from loadeval_nb.verdict import INPUT_BOUND

from ..harness import Ctx, hand_device_loop, hand_split, hand_steps, ladder_records
from ..maths import expected_verdict, mean, ms, steady, verdict_agrees
from ..pipeline import Photos, pipeline
from ..report import Record, fmt_value, rel, same
from ..workloads import ConvNet, Trainer


def check(ctx: Ctx) -> list[Record]:
    out = ctx.pick(224, 224, 32)
    batch, workers = ctx.pick(16, 16, 4), ctx.pick(4, 4, 2)
    cache = ctx.pick(4, 3, 2)
    # (image size, crop, dilation kernel, steps, warm-up): the costly pipeline, then the fix
    # (smaller images and a 3x3 dilation); both are scaled to ``out`` so the model's step
    # stays the same. The fix's loader keeps ahead of the loop at first: its workers start
    # with a queue of prefetch_factor x workers = 8 batches and get ahead while those are
    # served, so its first steady step is the 17th (the drain rule: 2 x 8 + 1), and it needs
    # many steps, its step being short (4 batches come together every 4 steps)
    costly = ctx.pick((1024, 768, 9, 30, 4), (1024, 768, 9, 18, 4), (96, 80, 5, 16, 4))
    fixed = ctx.pick((256, 224, 3, 80, 17), (256, 224, 3, 60, 17), (40, 32, 3, 16, 4))
    train = Trainer(ConvNet(*ctx.pick((64, 4), (64, 4), (4, 1))).to(ctx.dev))
    dev = ctx.dev

    def body(x: torch.Tensor) -> None:
        train(x.to(dev, non_blocking=True))

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            body(x)

    def loader_of(size: int, crop: int, k: int, steps: int) -> DataLoader:
        ds = Photos(batch * (steps + 4) * 2, size, pipeline(crop, k, out))
        return DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=ctx.cuda)

    body(torch.zeros(batch, 3, out, out))  # cuDNN picks its kernels before anything is timed
    recs: list[Record] = []
    found = {}
    for name, (size, crop, k, steps, warmup) in (("costly", costly), ("fixed", fixed)):
        settings = RunSettings(
            steps=steps, warmup=warmup, num_cached_batches=cache, cache_on=ctx.cache_on()
        )
        dl = loader_of(size, crop, k, steps)

        # the truths: the same loop timed by hand on the real loader and on a device cache,
        # before the tool's pair and after it (the GPU's step drifts by up to 10 % between
        # runs a minute apart); the costly real loop, 30 s a run, only after
        def hand_real(dl: DataLoader = dl, steps: int = steps, warmup: int = warmup) -> list[float]:
            return steady(hand_steps(ctx, dl, body, steps)[0], warmup)

        def hand_ideal(
            dl: DataLoader = dl, steps: int = steps, warmup: int = warmup
        ) -> list[float]:
            return steady(hand_device_loop(ctx, dl, body, steps, cache)[0], warmup)

        real_t, ideal_t = (hand_real() if name == "fixed" else []), hand_ideal()
        pair = run_pair(dl, run_once, settings)
        if not pair.ok or pair.diagnosis is None:
            raise RuntimeError(f"the {name} pair failed: {pair.error!r}")
        d = found[name] = pair.diagnosis
        real_s, ideal_s = mean(real_t + hand_real()), mean(ideal_t + hand_ideal())
        hand = real_s / ideal_s if real_s and ideal_s else None
        tag = f"{name} ({size}^2 images)"
        ci = f"95% CI {fmt_value(d.speedup_ci[0])}-{fmt_value(d.speedup_ci[1])}"
        recs += [
            rel("seed", f"{tag}: real step", ms(d.real_step_s), ms(real_s), 0.10, "ms"),
            rel("seed", f"{tag}: ideal step", ms(d.ideal_step_s), ms(ideal_s), 0.10, "ms"),
            rel("seed", f"{tag}: speedup with an ideal loader", d.speedup, hand, 0.15, "x", ci),
            same(
                "seed",
                f"{tag}: verdict",
                d.verdict,
                expected_verdict(hand),
                verdict_agrees(d.verdict, hand),
                "as the hand speedup calls for",
            ),
        ]
        if name == "costly":
            recs += seed_ladder(ctx, dl, run_once, settings, ideal_s, batch, workers)
    before, after = found["costly"], found["fixed"]
    turned = after.verdict != INPUT_BOUND or (
        after.speedup is not None
        and before.speedup is not None
        and after.speedup <= before.speedup / 2
    )
    recs.append(
        same(
            "seed",
            "after the fix: verdict, speedup",
            f"{after.verdict}, {fmt_value(after.speedup, 'x')}",
            f"not {INPUT_BOUND}, or under half of {fmt_value(before.speedup, 'x')}",
            turned,
            "the verdict turns",
        )
    )
    return recs


def seed_ladder(ctx, dl, run_once, settings, ideal_s, batch, workers) -> list[Record]:
    """The ladder on the costly pipeline: its largest stage and costliest transform step vs
    the transforms timed by hand, one sample at a time on one thread."""
    ladder = run_ladder(dl, run_once, settings)
    if not ladder.ok:
        raise RuntimeError(f"the ladder failed: {ladder.error!r}")
    ds = dl.dataset
    per = hand_split(
        ds.transform.transforms, lambda i: ds.pool[i % len(ds.pool)], ctx.pick(8, 4, 4)
    )
    return ladder_records("seed", ladder, per, None, batch, workers, ideal_s)
