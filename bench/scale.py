"""How the diagnosis scales with the number of steps: time and peak memory (tracemalloc).

    python bench/scale.py

The block bootstrap used to materialise every resample's indices (2,000 x steps):
a million-step pair needed about 15 GiB. It now works from prefix sums in chunks, so
memory grows with the steps, not with steps x resamples.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from loadeval_nb import Run, diagnose


def run_of(n: int, mean_ms: float, mode: str, seed: int) -> Run:
    rng = np.random.default_rng(seed)
    step = (rng.gamma(4, mean_ms / 4, n) * 1e6).astype(np.int64).tolist()
    start = np.concatenate(([0], np.cumsum(step)[:-1])).tolist()
    wait = [s // 3 for s in step] if mode == "log" else None
    return Run(mode=mode, start_ns=start, step_ns=step, wait_ns=wait, warmup_steps=10)


def main() -> None:
    print(f"{'steps':>10} {'diagnose':>10} {'peak memory':>12}")
    for n in (10_000, 100_000, 1_000_000):
        real, ideal = run_of(n, 20.0, "log", 1), run_of(n, 12.0, "replay", 2)
        t = time.perf_counter()
        d = diagnose(real, ideal)
        dt = time.perf_counter() - t
        tracemalloc.start()  # a second pass for the memory: tracing slows Python down
        diagnose(real, ideal)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{n:>10,} {dt:>9.2f}s {peak / 2**20:>9.0f} MiB   {d.verdict}, {d.speedup:.3f}x")


if __name__ == "__main__":
    main()
