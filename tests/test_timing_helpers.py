"""The helpers of the timed tests (tests/timing.py): a failure on a quiet machine still
fails, after one retry; a disturbed one is retried, then skipped; A B B A is A B B A."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from tests import timing
from tests.timing import Disturbed, OtherLoad, abba, excused_if_busy, retry_once


@pytest.fixture
def machine(monkeypatch):
    """What the load meter says: quiet (None) unless a test sets ``machine.busy``."""
    state = SimpleNamespace(busy=None)
    monkeypatch.setattr(OtherLoad, "reason", lambda self: state.busy)
    return state


def test_a_failure_on_a_quiet_machine_is_tried_twice_then_fails(machine):
    tries = []

    @retry_once
    def off_by_two():
        tries.append(1)
        assert 2.0 == pytest.approx(1.0, rel=0.05)

    with pytest.raises(AssertionError):
        off_by_two()
    assert len(tries) == 2


def test_a_failure_that_does_not_come_back_passes(machine):
    tries = []

    @retry_once
    def flaky():
        tries.append(1)
        assert len(tries) == 2

    flaky()
    assert len(tries) == 2


def test_a_run_the_tool_marked_disturbed_is_retried_then_skipped(machine):
    d = SimpleNamespace(disturbed=["real"], notes=["the real run: the comparison is disturbed"])
    tries = []

    @retry_once
    def disturbed():
        tries.append(1)
        with excused_if_busy(d):
            raise AssertionError("off")

    with pytest.raises(pytest.skip.Exception, match="the machine was busy: the real run"):
        disturbed()
    assert len(tries) == 2


def test_a_failure_on_a_busy_machine_is_skipped_not_failed(machine):
    machine.busy = "other processes kept 2.0 of 2 cores busy"

    @retry_once
    def slow():
        raise AssertionError()

    with pytest.raises(pytest.skip.Exception, match="kept 2.0 of 2 cores busy"):
        slow()


def test_a_disturbed_first_try_and_a_quiet_failing_second_fails(machine):
    tries = []

    @retry_once
    def check():
        tries.append(1)
        if len(tries) == 1:
            raise Disturbed("busy")
        raise AssertionError("off on a quiet machine")

    with pytest.raises(AssertionError, match="off on a quiet machine"):
        check()


def test_an_undisturbed_run_is_not_excused():
    quiet = SimpleNamespace(disturbed=[], notes=[])
    with pytest.raises(AssertionError):
        with excused_if_busy(quiet, None):
            raise AssertionError()
    with pytest.raises(Disturbed, match="a reason"):
        with excused_if_busy(quiet, "a reason"):
            raise AssertionError()


def test_abba_interleaves_and_compares_means():
    order = []

    def stopwatch():
        order.append("A")
        return 0.010

    def tool():
        order.append("B")
        return 0.011

    got = abba(stopwatch, tool)
    assert order == ["A", "B", "B", "A"]
    assert got.ratio == pytest.approx(1.1) and "1.100" in str(got)


def test_the_load_meter_leaves_out_our_own_processes(monkeypatch):
    # a machine where only this test runs: this process and a child burning a core
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    proc, last = psutil.Process(child.pid), {"child": 0.0}

    def machine_busy_s():
        with contextlib.suppress(psutil.Error):
            last["child"] = sum(proc.cpu_times()[:2])
        return sum(psutil.Process().cpu_times()[:2]) + last["child"]

    monkeypatch.setattr(timing, "_system_busy_s", machine_busy_s)
    try:
        with OtherLoad() as ours:
            time.sleep(1.0)
            machine_busy_s()  # its last CPU reading: it ends before the meter stops
            child.kill()
            child.wait()
    finally:
        child.kill()
        child.wait()
    # the child is ours, not another process's load (reaped, its CPU time is added to
    # ours); were it counted, others would have used as many cores as it did
    child_cores = last["child"] / ours.wall_s
    assert ours.cores is not None and ours.cores <= 0.2 * child_cores + 0.02, (
        ours.cores,
        child_cores,
    )
    assert ours.reason() is None and timing.disturbance(None, ours) is None
