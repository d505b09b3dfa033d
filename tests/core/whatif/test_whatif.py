"""The simulator fed from a measured pair: inputs taken from the runs, one line in the verdict."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoadEvalError
from loadeval_nb.core.explore import RunSettings, run_pair
from loadeval_nb.core.whatif import predict_from_runs
from loadeval_nb.core.whatif.from_runs import handoff_s, load_times_s
from tests.timing import excused_if_busy, retry_once
from tests.workloads import SleepyItems, sleep_steps


@pytest.mark.slow
@retry_once
def test_input_bound_one_worker_predicts_more_workers():
    # one worker, 4 x 15 ms = 60 ms per batch, 10 ms step: every batch is waited for;
    # sleeping loads do not use the cores, so ~6 workers would reach the ideal
    dl = DataLoader(SleepyItems(4000, 0.015), batch_size=4, num_workers=1)
    res = run_pair(dl, sleep_steps(0.010), RunSettings(steps=40, warmup=4, sample_interval_s=0.05))
    real, ideal = res.real, res.ideal
    loads = load_times_s(real)
    with excused_if_busy(res):
        assert loads and sorted(loads)[len(loads) // 2] == pytest.approx(0.060, rel=0.15)
    # all waits are load time, not hand-over: not mistaken for a hand-over cost
    assert handoff_s(real, loads) == 0.0
    with excused_if_busy(res):  # (a machine too busy to predict on says so)
        try:
            pred = predict_from_runs(real, ideal)
        except LoadEvalError as e:
            raise AssertionError(str(e)) from e
    assert pred is not None
    with excused_if_busy(res):
        assert pred.baseline.steps_per_s == pytest.approx(1 / 0.060, rel=0.15)
        assert pred.smallest_workers is not None and 6 <= pred.smallest_workers <= 8
    assert f"num_workers={pred.smallest_workers}" in res.diagnosis.prediction


def test_no_prediction_without_worker_timings():
    res = run_pair(
        [torch.zeros(2)] * 50,
        sleep_steps(0.0),
        RunSettings(steps=30, warmup=2, sample_interval_s=None),
    )
    assert res.diagnosis.prediction is None


def _pair_on(other_pct: float, cores: int = 2):
    from loadeval_nb import Run

    ms = 1_000_000
    cpu = {"process_pct": [100.0] * 10, "workers_pct": [5.0] * 10, "other_pct": [other_pct] * 10}
    real = Run(
        mode="log",
        start_ns=[k * 60 * ms for k in range(40)],
        step_ns=[60 * ms] * 40,
        wait_ns=[50 * ms] * 40,
        samples=[4] * 40,
        loader_settings={"num_workers": 1},
        worker_load_ns=[60 * ms] * 40,
        util={"interval_s": 0.1, "cpu": cpu},
        environment={"cpu_count": cores},
    )
    ideal = Run(
        mode="replay",
        start_ns=[k * 10 * ms for k in range(40)],
        step_ns=[10 * ms] * 40,
        samples=[4] * 40,
        util={"interval_s": 0.1, "cpu": cpu},
    )
    return real, ideal


def test_the_simulator_predicts_with_the_cores_other_processes_left():
    # dcgan on a busy machine: "with num_workers=1: about 1.6x faster", measured 0.6x,
    # 1.3 of 2 cores taken by other processes (which the output said)
    quiet = predict_from_runs(*_pair_on(0.0))
    assert quiet is not None
    with pytest.raises(LoadEvalError, match=r"other processes took 1\.3 of the machine's 2"):
        predict_from_runs(*_pair_on(130.0))
    # on 8 cores the same load leaves room: the prediction is made, on what is left
    assert predict_from_runs(*_pair_on(130.0, cores=8)) is not None
