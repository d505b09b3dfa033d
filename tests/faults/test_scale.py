"""Scale: what grew with the number of steps beyond reason (issue 12, item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from loadeval_nb import INPUT_BOUND, Run, diagnose
from loadeval_nb.core._stats import _block_means


def run_of(n, mean_ms, mode, seed):
    rng = np.random.default_rng(seed)
    step = (rng.gamma(4, mean_ms / 4, n) * 1e6).astype(np.int64).tolist()
    start = np.concatenate(([0], np.cumsum(step)[:-1])).tolist()
    wait = [s // 3 for s in step] if mode == "log" else None
    return Run(mode=mode, start_ns=start, step_ns=step, wait_ns=wait, warmup_steps=10)


@pytest.mark.slow
def test_a_million_step_pair_is_diagnosed():
    # the bootstrap used to hold 2,000 x steps resample indices: MemoryError (14.9 GiB)
    d = diagnose(run_of(1_000_000, 20.0, "log", 1), run_of(1_000_000, 12.0, "replay", 2))
    assert d.verdict == INPUT_BOUND and d.real_steady_steps == 999_990
    lo, hi = d.speedup_ci
    assert lo < d.speedup < hi and hi - lo < 0.02


def test_block_means_never_hold_a_resample_of_indices(monkeypatch):
    # the draws go in chunks whose size does not grow with the resamples
    import loadeval_nb.core._stats as stats

    class Spy:
        def __init__(self):
            self.rng, self.sizes = np.random.default_rng(0), []

        def integers(self, lo, hi, size):
            self.sizes.append(int(np.prod(size)))
            return self.rng.integers(lo, hi, size=size)

    monkeypatch.setattr(stats, "_CHUNK", 10_000)
    spy = Spy()
    means = _block_means(np.arange(100_000, dtype=float), 2000, spy)
    assert means.shape == (2000,) and max(spy.sizes) <= 10_000 and len(spy.sizes) > 1
    assert abs(means.mean() - 49_999.5) < 500
