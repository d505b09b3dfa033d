"""Per-step overhead of LoaderEvaluator over bare iteration.

Measures, in one process and interleaved with the bare baseline so machine
noise hits every variant alike:

  (a) a Python list of 1,000 small tensors
  (b) DataLoader(TensorDataset, batch_size=32, num_workers=0)

for log mode (samplers off and on) and replay mode, plus a reference: a plain
Python generator taking two perf_counter_ns stamps per step (the usual way to
write such a wrapper). Each figure is the median over --reps repetitions of a
whole epoch, minus the bare median, divided by the number of steps.

Goals (issue 2): log mode <= 180 ns/step added on (a); replay <= 100 ns/step.

    python bench/overhead.py [--reps 11] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import LoaderEvaluator

clock = time.perf_counter_ns


def loop(iterable: Any) -> int:
    t = clock()
    for _ in iterable:
        pass
    return clock() - t


def generator_wrapper(src: Any) -> Any:
    starts, ready = [], []
    it = iter(src)
    while True:
        starts.append(clock())
        try:
            b = next(it)
        except StopIteration:
            return
        ready.append(clock())
        yield b


def measure(variants: dict[str, Callable[[], int]], reps: int) -> dict[str, float]:
    """Median time of each variant; the order rotates every repetition. The cyclic GC is
    off while timing, as in timeit (a collection landing in one variant is noise)."""
    times: dict[str, list[int]] = {k: [] for k in variants}
    names = list(variants)
    for k in names:  # warm-up: first-epoch costs (first-batch inspection, caches)
        variants[k]()
    gc.disable()
    try:
        for r in range(reps):
            order = names[r % len(names) :] + names[: r % len(names)]
            for k in order:
                times[k].append(variants[k]())
    finally:
        gc.enable()
    return {k: statistics.median(v) for k, v in times.items()}


def case(name: str, source: Any, bare_replay: list[Any], steps: int, reps: int) -> list[dict]:
    log_off = LoaderEvaluator(source, mode="log", sample_interval_s=None)
    log_on = LoaderEvaluator(source, mode="log", sample_interval_s=0.1)
    replay = LoaderEvaluator(
        source, mode="replay", num_cached_batches=len(bare_replay), sample_interval_s=None
    )
    variants = {
        "bare": lambda: loop(source),
        "log (samplers off)": lambda: loop(log_off),
        "log (samplers on)": lambda: loop(log_on),
        "bare list of cached batches": lambda: loop(bare_replay * (steps // len(bare_replay))),
        "replay (samplers off)": lambda: loop(replay),
        "reference: generator, 2 stamps": lambda: loop(generator_wrapper(source)),
    }
    med = measure(variants, reps)
    rows = []
    for k, v in med.items():
        base = med["bare list of cached batches"] if k.startswith("replay") else med["bare"]
        rows.append(
            {
                "case": name,
                "variant": k,
                "median_ns_per_step": v / steps,
                "added_ns_per_step": (v - base) / steps,
                "ratio_to_baseline": v / base,
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.reps < 5:
        ap.error("--reps must be at least 5")
    torch.set_num_threads(1)
    logging_quiet()

    small = [torch.zeros(4) for _ in range(1000)]
    rows = case("(a) list of 1,000 small tensors", small, small[:20], 1000, args.reps)

    ds = TensorDataset(torch.randn(32 * 1000, 8), torch.arange(32 * 1000))
    dl = DataLoader(ds, batch_size=32, num_workers=0)
    cached = list(dl)[:20]
    rows += case("(b) DataLoader(TensorDataset, bs=32, workers=0)", dl, cached, len(dl), args.reps)

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {args.reps} reps, medians")
    print(f"{'case':<50} {'variant':<32} {'ns/step':>10} {'added ns/step':>14} {'ratio':>7}")
    for r in rows:
        print(
            f"{r['case']:<50} {r['variant']:<32} {r['median_ns_per_step']:>10.0f} "
            f"{r['added_ns_per_step']:>14.0f} {r['ratio_to_baseline']:>7.2f}"
        )
    print("replay rows are compared with a bare loop over a list of the same cached batches")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


def logging_quiet() -> None:
    import logging

    logging.getLogger("loadeval_nb").setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
