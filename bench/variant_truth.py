"""The variant arm against a stopwatch: what ``--try`` says a change buys, against the two
loaders timed by hand and interleaved, in the same process (issue 38).

Each workload is a sleeping loader (sleep takes no core: its gain from more workers is
known by construction) whose real loader has one worker, a 2 ms step, batches of 8. For
each run: a stopwatch (the two loaders' steps timed by hand, one, other, other, one, three
rounds of 40 steps), the tool's pass (``run_pair`` with ``RunSettings(variants=...)``), a
stopwatch again; the truth is the mean of the two stopwatches. Printed per workload: the
truth, the tool's reading and interval, whether the interval holds the truth, the reading
over the truth, and the pass's wall time against the same pass without the variant, run
side by side.

Workloads:

* ``w4``      3 ms a sample, ``num_workers=4`` (about 3.5–4× by construction);
* ``w2``      3 ms a sample, ``num_workers=2`` (about 2×);
* ``same``    3 ms a sample, ``prefetch_factor=4`` (no gain: 1.0×);

Loads: ``quiet``, ``busy1`` (one process spinning on a core), ``busy1.5`` (that, and one
spinning half the time), as ``bench/coverage.py`` makes them; a busy run's interval is
widened by the share of the cores other processes took, and says so.

Usage: python bench/variant_truth.py [--runs 5] [--only w4] [--load busy1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.coverage import Load  # noqa: E402
from loadeval_nb import RunSettings, run_pair  # noqa: E402
from loadeval_nb.measure import rebuild_loader  # noqa: E402

BATCH, STEP_S = 8, 0.002
WORKLOADS = {
    "w4": (0.003, "num_workers=4"),
    "w2": (0.003, "num_workers=2"),
    "same": (0.003, "prefetch_factor=4"),
}


class Sleepy(Dataset):
    def __init__(self, n: int, item_s: float) -> None:
        self.n, self.item_s = n, item_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.item_s)
        return torch.full((3,), float(i))


def loop(ev: object) -> None:
    for _ in ev:  # type: ignore[attr-defined]
        time.sleep(STEP_S)


def stopwatch(real: DataLoader, variant: DataLoader, rounds: int = 3, steps: int = 40) -> float:
    """The real loader's mean step over the variant's, timed by hand and interleaved."""
    its = {"r": iter(real), "v": iter(variant)}
    times: dict[str, list[float]] = {"r": [], "v": []}
    for k in range(rounds):
        for w in ("r", "v") if k % 2 == 0 else ("v", "r"):
            it = its[w]
            for _ in range(8):  # the queue filled while the other one ran
                next(it)
                time.sleep(STEP_S)
            t = time.perf_counter()
            for _ in range(steps):
                next(it)
                time.sleep(STEP_S)
            times[w].append((time.perf_counter() - t) / steps)
    for it in its.values():
        getattr(it, "_shutdown_workers", lambda: None)()
    return sum(times["r"]) / sum(times["v"])


def one(name: str) -> dict[str, object]:
    item_s, spec = WORKLOADS[name]
    real = DataLoader(Sleepy(8000, item_s), batch_size=BATCH, num_workers=1)
    variant = rebuild_loader(real, **{k: int(v) for k, v in [spec.split("=")]})
    settings = RunSettings(steps=200, warmup=8, num_cached_batches=8, contention=False)
    before = stopwatch(real, variant)
    t = time.perf_counter()
    plain = run_pair(real, loop, settings)
    t_plain = time.perf_counter() - t
    t = time.perf_counter()
    result = run_pair(real, loop, RunSettings(steps=200, warmup=8, num_cached_batches=8,
                                              contention=False, variants=spec))  # fmt: skip
    t_variant = time.perf_counter() - t
    after = stopwatch(real, variant)
    d = result.diagnosis
    assert d is not None and d.tried is not None, result.error
    truth = (before + after) / 2
    lo, hi = d.tried.speedup_ci
    return {
        "truth": truth,
        "before": before,
        "after": after,
        "tool": d.tried.speedup,
        "lo": lo,
        "hi": hi,
        "held": lo is not None and hi is not None and lo <= truth <= hi,
        "outcome": d.tried.outcome,
        "disturbed": bool(d.disturbed),
        "pass_ratio": t_variant / t_plain,
        "ideal": d.speedup,
        "plain_ok": plain.diagnosis is not None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default=None)
    ap.add_argument("--load", default="quiet", choices=("quiet", "busy1", "busy1.5"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    names = [args.only] if args.only else list(WORKLOADS)
    print("| workload | truth (stopwatch) | tool (95% CI) | held | tool/truth | outcome | "
          "pass time with/without | disturbed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        load = Load(args.load)
        try:
            rows = [one(name) for _ in range(args.runs)]
        finally:
            load.stop()
        for r in rows:
            print(
                f"| {name} (`--try {WORKLOADS[name][1]}`) | {r['truth']:.2f}× "
                f"({r['before']:.2f}, {r['after']:.2f}) | {r['tool']:.2f}× ({r['lo']:.2f}–"
                f"{r['hi']:.2f}×) | {'yes' if r['held'] else 'NO'} | "
                f"{r['tool'] / r['truth']:.3f} | {r['outcome']} | ×{r['pass_ratio']:.2f} | "
                f"{'yes' if r['disturbed'] else ''} |",
                flush=True,
            )
        ratios = [r["tool"] / r["truth"] for r in rows]  # type: ignore[operator]
        held = sum(bool(r["held"]) for r in rows)
        print(
            f"| **{name}** | | | **{held}/{len(rows)}** | median {statistics.median(ratios):.3f}, "
            f"worst {max(ratios, key=lambda x: abs(x - 1)):.3f} | | | |",
            flush=True,
        )


if __name__ == "__main__":
    main()
