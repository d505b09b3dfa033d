"""Utilisation samplers: schedule, soft failure without NVML, fake NVML, real CPU readings."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import types

import psutil
import pytest

import loadeval_nb.core.measure.readers as rd
import loadeval_nb.core.measure.sampler as smp
from loadeval_nb.core.measure import UtilSampler
from tests.timing import Disturbed, retry_once


@pytest.fixture
def fresh_nvml(monkeypatch):
    """Forget any NVML initialisation so each test decides what NVML looks like."""
    monkeypatch.setattr(rd, "_nvml_state", {})
    return monkeypatch


@pytest.mark.parametrize(
    "prev, interval, now, expected",
    [(100, 10, 101, 110), (100, 10, 110, 120), (100, 10, 137, 140), (0, 100, 0, 100)],
)
def test_drift_corrected_schedule(prev, interval, now, expected):
    assert smp.next_deadline(prev, interval, now) == expected


def test_schedule_does_not_drift():
    # a sampling cost of 3 ns per tick must not push later ticks back
    t, ticks = 0, []
    deadline = 0
    for _ in range(5):
        ticks.append(deadline)
        t = deadline + 3
        deadline = smp.next_deadline(deadline, 10, t)
    assert ticks == [0, 10, 20, 30, 40]


def test_no_nvml_gives_null_gpu_fields_and_one_line(fresh_nvml, caplog):
    fresh_nvml.setitem(sys.modules, "pynvml", None)  # import fails
    caplog.set_level(logging.WARNING, logger="loadeval_nb")
    for _ in range(2):
        s = UtilSampler(0.01)
        s.start()
        s.stop()
        series = s.series()
        assert series["gpu"]["available"] is False
        assert series["gpu"]["util_pct"] is None and series["gpu"]["mem_used_bytes"] is None
        assert "pynvml is not installed" in series["gpu"]["reason"]
        assert len(series["t_ns"]) >= 2
    lines = [r for r in caplog.records if "GPU utilisation is recorded as null" in r.getMessage()]
    assert len(lines) == 1


def _fake_pynvml(utils):
    calls = {"i": 0}

    def rates(h):
        calls["i"] += 1
        return types.SimpleNamespace(gpu=utils[h])

    return types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: len(utils),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: b"Fake GPU %d" % h,
        nvmlDeviceGetUtilizationRates=rates,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=1000 * (h + 1)),
    )


def test_fake_nvml_series_per_visible_gpu(fresh_nvml):
    fresh_nvml.setitem(sys.modules, "pynvml", _fake_pynvml([40, 90, 10]))
    fresh_nvml.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    s = UtilSampler(0.01, cpu=False)
    s.start()
    s.stop()
    series = s.series()
    assert [d["name"] for d in series["gpu"]["devices"]] == ["Fake GPU 0", "Fake GPU 2"]
    u = series["gpu"]["util_pct"]
    assert len(u) == 2 and set(u[0]) == {40.0} and set(u[1]) == {10.0}
    assert set(series["gpu"]["mem_used_bytes"][1]) == {3000}
    assert len(u[0]) == len(series["t_ns"])
    assert series["cpu"]["process_pct"] is None


BUSY_CHILD = "import time\nt = time.time()\nwhile time.time() - t < 5: pass"


def sampled_child(worker_pids=False, monkeypatch=None):
    """A busy child process sampled for 0.8 s: the sampler's CPU series, and the truth
    read from the child's own CPU clock around the sampling (% of a core)."""
    child = subprocess.Popen([sys.executable, "-c", BUSY_CHILD])
    listed = []
    try:
        me = psutil.Process(child.pid)
        s = UtilSampler(0.05, gpu=False)
        if worker_pids:
            s.worker_pids = lambda: {child.pid}
        cpu0, t0 = sum(me.cpu_times()[:2]), time.perf_counter()
        s.start()
        if monkeypatch is not None:
            monkeypatch.setattr(
                type(s._cpu_reader), "_list_children", lambda self: listed.append(1) or []
            )
        time.sleep(0.8)
        s.stop()
        truth = 100 * (sum(me.cpu_times()[:2]) - cpu0) / (time.perf_counter() - t0)
    finally:
        child.kill()
        child.wait()
    cpu = s.series()["cpu"]
    if truth < 20:  # the child hardly ran: nothing to compare
        raise Disturbed(f"the busy child got {truth:.0f}% of a core in 0.8 s")
    return s.series()["t_ns"], cpu, truth, listed


def time_weighted_mean(t_ns, pct):
    """The mean of per-interval readings (each covers the time since the previous one)."""
    pairs = [(v, t1 - t0) for v, t0, t1 in zip(pct[1:], t_ns, t_ns[1:]) if v is not None]
    return sum(v * dt for v, dt in pairs) / sum(dt for _, dt in pairs)


@pytest.mark.slow
@retry_once
def test_cpu_sampler_sees_a_busy_child_process():
    t_ns, cpu, truth, _ = sampled_child()
    # the sampler agrees with the child's own CPU clock (about a core on a quiet machine)
    assert time_weighted_mean(t_ns, cpu["workers_pct"]) == pytest.approx(truth, rel=0.2, abs=5)
    assert max(cpu["workers"]) >= 1


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU clocks of other processes")
@retry_once
def test_known_workers_are_read_from_their_cpu_clocks_without_listing(monkeypatch):
    t_ns, cpu, truth, listed = sampled_child(worker_pids=True, monkeypatch=monkeypatch)
    assert time_weighted_mean(t_ns, cpu["workers_pct"]) == pytest.approx(truth, rel=0.2, abs=5)
    assert set(cpu["workers"][1:]) == {1} and listed == []


def test_sampler_interval_validated():
    with pytest.raises(ValueError, match="positive"):
        UtilSampler(0)


def test_stop_joins_thread():
    s = UtilSampler(0.01, gpu=False)
    s.start()
    s.start()  # idempotent
    assert s.running
    s.stop()
    s.stop()
    assert not s.running


def test_other_processes_on_the_gpu_are_counted_and_make_the_run_disturbed(fresh_nvml):
    import os

    from loadeval_nb import Run, diagnose

    fake = _fake_pynvml([40])
    others = types.SimpleNamespace(pid=os.getpid() + 100_000)  # someone else's training
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=os.getpid()),
        others,
    ]
    fresh_nvml.setitem(sys.modules, "pynvml", fake)
    s = UtilSampler(0.01, cpu=False)
    s.start()
    s.stop()
    procs = s.series()["gpu"]["other_procs"]
    assert procs and set(procs) == {1}  # our own process is not "other"

    def run(mode, util):
        step = [10_000_000] * 30
        wait = [1] * 30 if mode == "log" else None
        return Run(
            mode=mode,
            start_ns=[i * 10_000_000 for i in range(30)],
            step_ns=step,
            wait_ns=wait,
            util=util,
        )

    d = diagnose(run("log", None), run("replay", s.series()))
    assert d.disturbed == ["ideal"]
    assert any(
        "other processes' work on the GPU (up to 1 at a time) during the ideal run" in n
        for n in d.notes
    )


def test_a_process_whose_parent_said_why_keeps_it_to_the_debug_log(fresh_nvml, caplog):
    # the script runner says it once and sets NVML_SAID_ENV in its children (it was said
    # once per child: twice for a --sequential pair, and frameworks' loggers made each
    # line a WARNING:)
    fresh_nvml.setitem(sys.modules, "pynvml", None)
    fresh_nvml.setenv("LOADEVAL_NB_NVML_SAID", "1")
    caplog.set_level(logging.DEBUG, logger="loadeval_nb")
    s = UtilSampler(0.01)
    s.start()
    s.stop()
    assert "pynvml is not installed" in s.series()["gpu"]["reason"]  # still recorded
    said = [r for r in caplog.records if "GPU utilisation is recorded as null" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.DEBUG]
