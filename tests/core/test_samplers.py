"""Utilisation samplers: schedule, soft failure without NVML, fake NVML, real CPU readings."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import types

import pytest

import loadeval_nb.core.measure.readers as rd
import loadeval_nb.core.measure.sampler as smp
from loadeval_nb.core import UtilSampler


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
        time.sleep(0.05)
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
    time.sleep(0.06)
    s.stop()
    series = s.series()
    assert [d["name"] for d in series["gpu"]["devices"]] == ["Fake GPU 0", "Fake GPU 2"]
    u = series["gpu"]["util_pct"]
    assert len(u) == 2 and set(u[0]) == {40.0} and set(u[1]) == {10.0}
    assert set(series["gpu"]["mem_used_bytes"][1]) == {3000}
    assert len(u[0]) == len(series["t_ns"])
    assert series["cpu"]["process_pct"] is None


def test_cpu_sampler_sees_a_busy_child_process():
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<1.5: pass"]
    )
    try:
        s = UtilSampler(0.05, gpu=False)
        s.start()
        time.sleep(0.8)
        s.stop()
    finally:
        child.kill()
        child.wait()
    cpu = s.series()["cpu"]
    workers = [v for v in cpu["workers_pct"] if v is not None]
    assert max(workers) > 40  # a busy loop is close to 100% of a core
    assert max(cpu["workers"]) >= 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU clocks of other processes")
def test_known_workers_are_read_from_their_cpu_clocks_without_listing(monkeypatch):
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<1.5: pass"]
    )
    try:
        s = UtilSampler(0.05, gpu=False)
        s.worker_pids = lambda: {child.pid}
        s.start()
        listed = []
        monkeypatch.setattr(
            type(s._cpu_reader), "_list_children", lambda self: listed.append(1) or []
        )
        time.sleep(0.8)
        s.stop()
    finally:
        child.kill()
        child.wait()
    cpu = s.series()["cpu"]
    assert max(v for v in cpu["workers_pct"] if v is not None) > 40
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
    time.sleep(0.06)
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
        n.startswith("other processes ran work on the GPU during the ideal run (up to 1")
        for n in d.notes
    )
