"""The verdict under faults: zero-length steps, swapped logs, runs from two machines, a
million-step pair, the block means' memory, and the bad-input catalogue's diagnose and
compare cases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from loadeval_nb import (
    LoadEvalError,
    Run,
    compare_runs,
    diagnose,
)
from loadeval_nb.core._stats import _block_means
from loadeval_nb.verdict import INPUT_BOUND, NOT_ENOUGH_DATA
from tests.catalogue import InputUser, check_bad_input, run_of


def ms_run(ms: float, mode: str = "log", n: int = 20) -> Run:
    step = [int(ms * 1e6)] * n
    wait = [1] * n if mode == "log" else None
    return Run(mode=mode, start_ns=[i * step[0] for i in range(n)], step_ns=step, wait_ns=wait)


def noisy_run(n, mean_ms, mode, seed):
    rng = np.random.default_rng(seed)
    step = (rng.gamma(4, mean_ms / 4, n) * 1e6).astype(np.int64).tolist()
    start = np.concatenate(([0], np.cumsum(step)[:-1])).tolist()
    wait = [s // 3 for s in step] if mode == "log" else None
    return Run(mode=mode, start_ns=start, step_ns=step, wait_ns=wait, warmup=10)


def test_zero_duration_steps_get_a_verdict_not_an_assertion():
    d = diagnose(run_of(0), run_of(0, "replay"))
    assert d.verdict == NOT_ENOUGH_DATA and "no measurable time" in d.reason


def test_swapped_logs_are_refused():
    with pytest.raises(LoadEvalError, match="they look swapped; pass the log-mode run as real"):
        diagnose(run_of(10, "replay"), run_of(20, "log"))


def test_runs_from_different_machines_say_so():
    a = run_of(20, environment={"platform": "Linux-a", "cpu_count": 2})
    b = run_of(10, "replay", environment={"platform": "Linux-b", "cpu_count": 16})
    assert any(
        "different machines or setups (platform, cpu_count differ)" in n
        for n in diagnose(a, b).notes
    )


def test_compare_says_when_a_real_run_meets_an_ideal_one_or_another_machine(tmp_path):
    from loadeval_nb import compare_runs

    step = [10_000_000] * 30
    real = Run(mode="log", start_ns=list(range(30)), step_ns=step, environment={"cpu_count": 2})
    ideal = Run(
        mode="replay", start_ns=list(range(30)), step_ns=step, environment={"cpu_count": 64}
    )
    res = compare_runs(real, ideal)
    assert "compares the real loader with the ideal one" in res.text()
    assert res.machines == "cpu_count 2 → 64"
    assert any(f.key == "machines" for f in res.facts().facts)


@pytest.mark.slow
def test_a_million_step_pair_is_diagnosed():
    # the bootstrap used to hold 2,000 x steps resample indices: MemoryError (14.9 GiB)
    d = diagnose(noisy_run(1_000_000, 20.0, "log", 1), noisy_run(1_000_000, 12.0, "replay", 2))
    assert d.verdict == INPUT_BOUND and d.real_steady_steps == 999_990
    lo, hi = d.speedup_ci
    # a million steps: the steps' interval is a hair; the method's floor (±2 %) is left
    assert lo < d.speedup < hi and hi / lo < 1.02**2 + 1e-9


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


CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
    (
        "diagnose-swapped",
        lambda u: diagnose(ms_run(10, "replay"), ms_run(20)),
        LoadEvalError,
        "The real run is a replay and the ideal run a log: they look swapped; pass the log-mode run as real and the replay as ideal.",
    ),
    (
        "diagnose-not-runs",
        lambda u: diagnose("real.json", "ideal.json"),
        LoadEvalError,
        "No run log at 'real.json'; check the path or record the run first.",
    ),
    (
        "compare-not-runs",
        lambda u: compare_runs(1, 2),
        LoadEvalError,
        "before must be a run, a ladder or a transform split (a LoaderEvaluator, a "
        "LadderResult, a TransformSplit, or the path of its JSON file), not an int.",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)
