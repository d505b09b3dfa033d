"""Ground truths for the pair: interleaved (the default) against one run after the other.

Four sleep-based workloads whose truth is known, each measured ``--runs`` times three
ways, side by side in the same process:

* ``stopwatch``: the truth. The loop over the real DataLoader and the loop over a list
  of cached batches, timed with ``time.perf_counter`` in A B B A blocks, no tool;
* ``interleaved``: ``run_pair`` as it runs by default (real and ideal blocks in one loop);
* ``sequential``: ``run_pair`` with ``RunSettings(interleave=False)`` (the real run,
  then the ideal run).

Workloads (batch of 4):

* ``images``   2 workers, 4 ms a sample (16 ms a batch a worker), step 5 ms: input-bound;
* ``text``     no workers, 1 ms a batch in the loop's process, step 10 ms: ~1.16×, the
               newcomer's text pipeline of issue 20;
* ``compute``  2 workers, 0.5 ms a sample, step 50 ms: compute-bound;
* ``drifting`` ``text`` whose step grows by 20 % over the measurement (step *k* of *K*
               sleeps ``10 ms × (1 + 0.2 k / K)``), as a machine that slows down would.

For each run it prints the truth, each method's speedup, its error against the truth and
its verdict; at the end, per workload and method, the runs within 5 % of the truth, the
runs with the truth's verdict, and the mean time a pair took.

Usage: python bench/interleave_truth.py [--runs 10] [--steps 120] [--only drifting,text]
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

from loadeval_nb import RunSettings, run_pair

warnings.filterwarnings("ignore")

WORKLOADS = {
    # name: (num_workers, seconds a sample, step seconds, drift over the measurement)
    "images": (2, 0.004, 0.005, 0.0),
    "text": (0, 0.00025, 0.010, 0.0),
    "compute": (2, 0.0005, 0.050, 0.0),
    "drifting": (0, 0.00025, 0.010, 0.2),
}
BATCH = 4


class Sleepy(Dataset):
    def __init__(self, per_sample: float) -> None:
        self.per_sample = per_sample

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.per_sample)
        return torch.zeros(4)


class Step:
    """The training step: sleeps ``base``, growing by ``drift`` over ``total`` steps."""

    def __init__(self, base: float, drift: float) -> None:
        self.base, self.drift, self.k, self.total = base, drift, 0, 1

    def start(self, total: int) -> None:
        self.k, self.total = 0, max(total, 1)

    def __call__(self) -> None:
        grow = self.drift * min(1.0, self.k / self.total)
        self.k += 1
        time.sleep(self.base * (1 + grow))


def stopwatch(loader: DataLoader, step: Step, n: int, warmup: int) -> tuple[float, int]:
    """The truth: real and cached loops in A B B A blocks (two cycles); steps counted."""
    cache = [b for b, _ in zip(loader, range(20))]
    real_s, ideal_s = [], []

    def real() -> None:
        it = iter(loader)
        for _ in range(warmup):
            next(it)
            step()
        t = time.perf_counter()
        for _ in range(n):
            next(it)
            step()
        real_s.append((time.perf_counter() - t) / n)
        del it

    def ideal() -> None:
        t = time.perf_counter()
        for k in range(n):
            _ = cache[k % len(cache)]
            step()
        ideal_s.append((time.perf_counter() - t) / n)

    for _ in range(2):
        real()
        ideal()
        ideal()
        real()
    return statistics.mean(real_s) / statistics.mean(ideal_s), step.k


def pair(loader: DataLoader, step: Step, settings: RunSettings) -> tuple[float, str, float, int]:
    def run_once(ev: object) -> None:
        for _ in ev:  # type: ignore[attr-defined]
            step()

    t = time.perf_counter()
    result = run_pair(loader, run_once, settings)
    took = time.perf_counter() - t
    d = result.diagnosis
    if d is None or d.speedup is None:
        return float("nan"), "failed", took, step.k
    return d.speedup, d.verdict, took, step.k


def truth_verdict(speedup: float) -> str:
    headroom = 1 - 1 / speedup
    if headroom >= 0.20:
        return "INPUT-BOUND"
    if headroom >= 0.05:
        return "PARTLY INPUT-BOUND"
    return "NOT INPUT-BOUND"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in WORKLOADS if not args.only or n in args.only.split(",")]
    methods = {
        "interleaved": RunSettings(steps=args.steps, warmup=10, sample_interval_s=None),
        "sequential": RunSettings(
            steps=args.steps, warmup=10, sample_interval_s=None, interleave=False
        ),
    }
    summary: dict[tuple[str, str], list[tuple[float, bool, bool, float]]] = {}
    print(f"{args.runs} runs, {args.steps} steps per side; speedup (error vs truth) verdict")
    for name in names:
        workers, per_sample, base, drift = WORKLOADS[name]
        loader = DataLoader(Sleepy(per_sample), batch_size=BATCH, num_workers=workers)
        step = Step(base, drift)
        # how many steps each method's loop runs, so that the drift spans each measurement
        totals = {}
        step.start(1)
        step.drift, keep = 0.0, step.drift
        _, totals["stopwatch"] = stopwatch(loader, step, args.steps - 10, 10)
        for m, settings in methods.items():
            step.start(1)
            *_, totals[m] = pair(loader, step, settings)
        step.drift = keep
        for run in range(args.runs):
            step.start(totals["stopwatch"])
            truth, _ = stopwatch(loader, step, args.steps - 10, 10)
            want = truth_verdict(truth)
            line = [f"{name:9s} run {run + 1:2d}: truth {truth:.3f}× {want:18s}"]
            for m, settings in methods.items():
                step.start(totals[m])
                s, verdict, took, _ = pair(loader, step, settings)
                err = s / truth - 1
                ok = abs(err) <= 0.05
                summary.setdefault((name, m), []).append((err, ok, verdict == want, took))
                line.append(f"{m} {s:.3f}× ({err:+.1%}) {verdict} [{took:.1f} s]")
            print(" | ".join(line), flush=True)
    print("\nworkload   method       within 5 %  verdict right  mean |error|  pair time")
    for (name, m), rows in summary.items():
        n = len(rows)
        print(
            f"{name:10s} {m:12s} {sum(r[1] for r in rows):3d}/{n:<3d}     "
            f"{sum(r[2] for r in rows):3d}/{n:<3d}        "
            f"{statistics.mean(abs(r[0]) for r in rows):6.1%}      "
            f"{statistics.mean(r[3] for r in rows):5.1f} s"
        )


if __name__ == "__main__":
    main()
