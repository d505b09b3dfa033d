"""The DataLoader model: closed forms for constant times, and a real sleep-based loader."""

from __future__ import annotations

import math
import time

import pytest
from torch.utils.data import DataLoader

from loadeval_nb.core.errors import LoadEvalError
from loadeval_nb.core.measure import WorkerFetchTimer
from loadeval_nb.core.whatif import predict, simulate
from loadeval_nb.core.whatif.simulator import usable_cores
from tests.timing import retry_once
from tests.workloads import SleepyItems, take

L, S = 0.100, 0.030  # load per batch, compute per step (seconds)


def rel(a: float, b: float) -> float:
    return abs(a - b) / b


# -- closed forms with constant times ---------------------------------------------


def test_no_workers_step_is_load_plus_compute():
    r = simulate([L], [S], 0)
    assert r.prefetch_factor is None
    assert r.step_s == pytest.approx(L + S)
    assert r.wait_share == pytest.approx(L / (L + S))


def test_input_bound_rate_and_one_stall_every_w_steps():
    W, s = 4, 0.010  # L / W = 25 ms > 10 ms
    r = simulate([L], [s], W, prefetch_factor=2)
    assert r.steps_per_s == pytest.approx(W / L, rel=1e-9)
    assert r.wait_share == pytest.approx(1 - W * s / L, rel=1e-9)
    stalls = [i for i, x in enumerate(r.wait_s) if x > 1e-9]
    assert r.stall_share == pytest.approx(1 / W)
    assert {b - a for a, b in zip(stalls, stalls[1:])} == {W}  # W−1 ready, then one wait
    assert r.mean_wait_s * W == pytest.approx(L - W * s)


def test_compute_bound_rate_and_no_waits():
    r = simulate([L], [S], 4)  # L / W = 25 ms < 30 ms
    assert r.steps_per_s == pytest.approx(1 / S, rel=1e-9)
    assert r.wait_share == pytest.approx(0, abs=1e-9)
    assert r.stall_share == 0


def test_handoff_cost_is_paid_on_every_batch():
    h = 0.002
    compute_bound = simulate([L], [S], 8, handoff_s=h)
    assert compute_bound.step_s == pytest.approx(S + h)
    assert compute_bound.mean_wait_s == pytest.approx(h) and compute_bound.stall_share == 0
    input_bound = simulate([L], [0.010], 4, handoff_s=h)
    assert input_bound.steps_per_s == pytest.approx(4 / L, rel=1e-9)
    assert simulate([L], [S], 0, handoff_s=h).step_s == pytest.approx(L + S)  # no workers


def test_diminishing_returns_linear_then_flat():
    for w in range(1, 9):
        r = simulate([L], [S], w)
        assert r.steps_per_s == pytest.approx(min(w / L, 1 / S), rel=1e-6), w


def test_smallest_workers_matches_the_analytic_value():
    p = predict([L], [S], num_workers=1, cores=64, contention=False)
    assert p.ideal_steps_per_s == pytest.approx(1 / S)
    assert p.smallest_workers == math.ceil(0.95 * L / S) == 4
    assert p.cores_ok
    assert p.speedup(4) == pytest.approx((1 / S) / (1 / L))
    assert p.line() == "with num_workers=4: about 3.3× faster (4 workers fit the 64 cores)"
    assert [r.num_workers for r in p.curve()] == list(range(0, 129))


def test_jitter_spreads_the_waits_but_stays_input_bound():
    W, s = 4, 0.010
    const = simulate([L], [s], W, prefetch_factor=4)
    jitter = simulate(lambda rng: rng.uniform(0.5 * L, 1.5 * L), [s], W, prefetch_factor=4)
    assert jitter.steps_per_s == pytest.approx(W / L, rel=0.05)
    assert jitter.wait_share > 0.5  # still clearly input-bound
    assert jitter.stall_share > const.stall_share
    phases = {i % W for i, x in enumerate(jitter.wait_s) if x > 0.01 * s}
    assert len(phases) > 1  # no longer one fixed step out of every W


def test_bounded_prefetch_costs_throughput_with_jitter():
    jittery = lambda rng: rng.expovariate(1 / L)  # noqa: E731
    low = simulate(jittery, [S], 4, prefetch_factor=1)
    high = simulate(jittery, [S], 4, prefetch_factor=4)
    assert high.steps_per_s > 1.2 * low.steps_per_s
    assert high.wait_share < low.wait_share


# -- draws, contention, determinism ----------------------------------------------


def test_bootstrap_is_seeded_and_uses_the_samples():
    loads = [0.05, 0.1, 0.2]
    a = simulate(loads, [S], 2, seed=3)
    b = simulate(loads, [S], 2, seed=3)
    c = simulate(loads, [S], 2, seed=4)
    assert a == b and a.wait_s == b.wait_s
    assert a != c
    mean_load = sum(loads) / 3
    inline = simulate(loads, [S], 0, seed=3)  # no workers: step = load + compute
    assert inline.step_s == pytest.approx(mean_load + S, rel=0.03)


def test_contention_scales_loads_beyond_the_usable_cores():
    assert usable_cores(1) == 1 and usable_cores(3) == 2 and usable_cores(4, 0.5) == 3.5
    assert simulate([L], [S], 2, cores=3).load_scale == 1.0
    r = simulate([L], [0.001], 4, cores=3)
    assert r.load_scale == 2.0
    assert r.steps_per_s == pytest.approx(2 / L, rel=1e-6)  # 4 workers on 2 cores: 2 / L
    rel_r = simulate([L], [0.001], 1, cores=3, measured_workers=4)
    assert rel_r.load_scale == 0.5  # measured under 2× contention, one worker has none
    inline = simulate([L], [S], 0, cores=3, measured_workers=4)
    assert inline.load_scale == 0.5 and inline.step_s == pytest.approx(L / 2 + S)
    idle_main = simulate([L], [0.001], 4, cores=2, reserve_cores=0)
    assert idle_main.load_scale == 2.0  # 4 workers on both cores of an idle main process
    with pytest.raises(LoadEvalError, match="reserve_cores"):
        simulate([L], [S], 1, cores=2, reserve_cores=-1)


def test_predict_with_contention_sees_the_core_limit():
    p = predict([L], [0.010], num_workers=1, cores=4)  # 3 usable cores
    best = max(p.curve(), key=lambda r: r.steps_per_s)
    assert best.steps_per_s == pytest.approx(3 / L, rel=2e-3)  # window edges
    assert p.smallest_workers is None and not p.cores_ok
    assert p.line().startswith("with num_workers=3: about 3.0× faster, still short")


def test_waiting_loads_are_not_held_to_the_core_count():
    # loads that only wait (I/O, sleeps): 4 workers on 2 cores still reach the ideal rate
    p = predict([L], [S], num_workers=1, cores=2, contention=False)
    assert p.smallest_workers == 4 and p.cores_ok
    assert "expect less" not in p.line()
    assert p.line().endswith("(loading mostly waits, so workers need not have a core each)")
    # the same loads on the CPU: two cores cannot get there
    q = predict([L], [S], num_workers=1, cores=2, reserve_cores=0)
    assert q.smallest_workers is None and not q.cores_ok


def test_line_when_already_fast_enough():
    p = predict([0.01], [S], num_workers=2, cores=8)
    assert "already runs within 5 %" in p.line()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(load_s=[], step_s=[S], num_workers=1), "load_s is empty"),
        (dict(load_s=[L], step_s=[-1.0], num_workers=1), "step_s must hold finite times"),
        (dict(load_s=[L], step_s=[S], num_workers=-1), "num_workers must be an integer >= 0"),
        (dict(load_s=[L], step_s=[S], num_workers=2, prefetch_factor=0), "prefetch_factor"),
        (dict(load_s=[L], step_s=[S], num_workers=1, n_batches=10, warmup=10), "warmup"),
        (
            dict(load_s="abc", step_s=[S], num_workers=1),
            "load_s must be a time in seconds, a list of them",
        ),
        (dict(load_s=lambda rng: -1.0, step_s=[S], num_workers=1), "must return finite"),
        (dict(load_s=[0.0], step_s=[0.0], num_workers=1), "all zero"),
        (dict(load_s=[L], step_s=[S], num_workers=1, handoff_s=-0.1), "handoff_s"),
        (
            dict(load_s=[L], step_s=[S], num_workers=1, reserve_cores=True),
            "reserve_cores must be a number of cores >= 0, not True",
        ),
    ],
)
def test_bad_input_says_what_to_do(kwargs, match):
    with pytest.raises(LoadEvalError, match=match):
        simulate(**kwargs)


def test_predict_rejects_bad_input():
    with pytest.raises(LoadEvalError, match="prefetch_factor"):
        predict([L], [S], num_workers=2, prefetch_factor=0)
    with pytest.raises(LoadEvalError, match="workers"):
        predict([L], [S], num_workers=2, workers=[-1, 2])
    with pytest.raises(LoadEvalError, match="workers is empty"):
        predict([L], [S], num_workers=2, workers=[])
    with pytest.raises(LoadEvalError, match="step_s is all zero"):  # not a ZeroDivisionError
        predict([L], [0.0], num_workers=2)


def test_other_prefetch_factors_are_simulated_when_asked():
    p = predict([L], [S], num_workers=2, cores=4)
    assert {r.prefetch_factor for r in p.results} == {None, 2}  # only the measured one
    assert [r.prefetch_factor for r in p.curve(4)[1:]] == [4] * 16
    assert p.result(3, 4).steps_per_s >= p.result(3, 2).steps_per_s


# -- the model against a real DataLoader ----------------------------------------

BATCH_LOAD_S, STEP_S = 0.040, 0.015
WARM, MEASURED = 5, 40


def run_real(num_workers: int) -> tuple[float, list[float], list[float]]:
    """Measured steps/s over MEASURED steps after WARM, step times, worker load times."""
    # each batch (batch_size=None) takes 40 ms to make; sleeping needs no core
    batches = SleepyItems(WARM + MEASURED + 20, BATCH_LOAD_S)
    loader = DataLoader(batches, batch_size=None, num_workers=num_workers)
    timer = WorkerFetchTimer(loader)
    it = timer.iter()
    got: list[float] = []
    steps: list[float] = []
    for _ in range(WARM + MEASURED + 1):
        next(it)
        t = time.perf_counter()
        got.append(t)
        take(STEP_S)
        steps.append(time.perf_counter() - t)
    del it  # shuts the workers down
    loads = [x / 1e9 for x in timer.load_ns()]
    timer.close()
    return MEASURED / (got[WARM + MEASURED] - got[WARM]), steps, loads


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@retry_once  # real worker processes and a stopwatch: a busy machine excuses a failure
def test_model_matches_a_real_sleep_loader():
    measured = {w: run_real(w) for w in (1, 2, 4)}
    loads = measured[2][2]  # measured once, at num_workers=2
    steps = [s for _, st, _ in measured.values() for s in st]
    assert len(loads) >= WARM + MEASURED
    for w, (rate, _, _) in measured.items():
        predicted = simulate(loads, steps, w).steps_per_s
        assert rel(rate, predicted) < 0.15, (w, rate, predicted)
    # and the shape: input-bound up to 2 workers, compute-bound at 4
    assert measured[1][0] < measured[2][0] < measured[4][0]
