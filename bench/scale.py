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
    return Run(mode=mode, start_ns=start, step_ns=step, wait_ns=wait, warmup=10)


def metrics_file_cost(epochs: int = 300, steps: int = 1000) -> None:
    """Time of each epoch of a near-free loop with ``metrics_file`` set, against the same
    epoch without it (side by side): the writing's cost must not grow with the run."""
    import os
    import tempfile

    from loadeval_nb import LoaderEvaluator

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        with_file = LoaderEvaluator(list(range(steps)), metrics_file=path, sample_interval_s=None)
        bare = LoaderEvaluator(list(range(steps)), sample_interval_s=None)
        extra = []
        for _ in range(epochs):
            t = time.perf_counter()
            for _b in with_file:
                pass
            t1 = time.perf_counter()
            for _b in bare:
                pass
            extra.append((t1 - t) - (time.perf_counter() - t1))
        t = time.perf_counter()
        with_file.close()
        close_s = time.perf_counter() - t
    print(f"\nmetrics_file, {epochs} epochs of {steps:,} steps: added time per epoch end")
    for k in (1, epochs // 10, epochs // 2, epochs):
        window = extra[max(0, k - 10) : k]
        print(
            f"  by step {k * steps:>9,}: {1e3 * sum(window) / len(window):7.2f} ms (mean of last 10)"
        )
    print(f"  total {sum(extra):.2f} s; close() writes the whole log once: {close_s:.2f} s")


def main() -> None:
    metrics_file_cost()
    print(f"\n{'steps':>10} {'diagnose':>10} {'peak memory':>12}")
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
