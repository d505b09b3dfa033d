"""Issue 13: the tool does not change what it measures.

Samplers off the loop's path (one thread per evaluator, paused between epochs, set up
before the first timed step), start-up reported apart from the steady steps, CPU
readings that are bounded or say the run was too short, and the first evaluator of a
fresh process reading a sleep-based loop like an independent stopwatch.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb import LoaderEvaluator, RunSettings, load_run, run_pair
from loadeval_nb.core.measure import copies
from loadeval_nb.verdict import NOT_INPUT_BOUND
from tests.timing import Interleaved, excused_if_busy, retry_once
from tests.workloads import SleepyItems, sleep_steps, take


@pytest.mark.slow
def test_one_sampler_thread_for_all_epochs_and_no_join_at_an_epoch_end(monkeypatch):
    ev = LoaderEvaluator(list(range(20)), sample_interval_s=0.01)
    started = []
    real_start = threading.Thread.start

    def counting_start(self):
        started.append(self.name)
        real_start(self)

    def no_join(self, timeout=None):
        raise AssertionError("an epoch's end joined a thread")

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    for _ in ev:  # the first epoch starts the sampler's thread
        pass
    thread = ev.util_sampler._thread
    monkeypatch.setattr(threading.Thread, "join", no_join)
    for _ in range(5):
        for _ in ev:
            take(0.002)
    assert started == ["loadeval-sampler"]
    assert ev.util_sampler._thread is thread and thread.is_alive()
    monkeypatch.undo()
    ev.close()  # close() ends it
    assert not thread.is_alive()


def test_the_sampler_is_set_up_before_the_first_timed_step():
    ev = LoaderEvaluator(list(range(5)), sample_interval_s=0.05)
    it = iter(ev)
    s = ev.util_sampler
    # imports, psutil and NVML were set up and the first reading taken in iter(), here
    assert s._cpu_reader is not None and len(s.t_ns) == 1
    first_step = ev._epochs[0].starts
    assert not first_step or s.t_ns[0] <= first_step[0]
    list(it)
    ev.close()


def test_a_sampler_nobody_holds_ends_its_thread():
    import gc

    ev = LoaderEvaluator(list(range(5)), sample_interval_s=0.01)
    list(ev)
    thread = ev.util_sampler._thread
    del ev
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


@pytest.mark.slow
@retry_once
def test_cpu_readings_are_bounded_and_short_runs_say_so():
    ev = LoaderEvaluator(list(range(2)), sample_interval_s=0.1)
    for _ in ev:
        pass
    ev.close()
    run = ev.to_run()
    assert run.mean_cpu_pct("process_pct") is None
    assert run.cpu_text() == "too short to sample (under 0.2 s of sampling)"
    ev = LoaderEvaluator(list(range(40)), sample_interval_s=0.02)
    for _ in ev:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.01:  # a busy step: about one core
            pass
    ev.close()
    run = ev.to_run()
    cap = 100 * os.cpu_count()
    vals = [v for v in run.util["cpu"]["process_pct"] if v is not None]
    assert vals and all(0 <= v <= cap for v in vals)
    with excused_if_busy(run):  # a busy step gets less than a core on a busy machine
        assert 50 < run.mean_cpu_pct("process_pct") <= cap
    assert run.cpu_text().startswith("process ")


class SlowStart(Dataset):
    """The first item takes ``first_s`` (a worker's start-up), the rest ``item_s``, on a
    fake ``clock``."""

    def __init__(self, n, first_s, item_s, clock):
        self.n, self.first_s, self.item_s, self.clock = n, first_s, item_s, clock

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        take(self.first_s if i == 0 else self.item_s, self.clock)
        return torch.zeros(2)


def test_start_up_is_reported_apart_and_never_in_the_steady_mean(tmp_path, clock):
    # warmup=0 (DALI's default): the 300 ms first batch must not reach the mean
    path = tmp_path / "run.json"
    ev = LoaderEvaluator(
        DataLoader(SlowStart(30, 0.3, 0.001, clock), batch_size=1),
        warmup=0,
        metrics_file=str(path),
        sample_interval_s=None,
        clock=clock,
    )
    for _ in ev:
        take(0.01, clock)
    ev.close()
    run = load_run(path)
    assert run.startup_s() == pytest.approx(0.3)
    assert run.summary()["startup_s"] == pytest.approx(0.3)
    assert run.blocks[0]["startup_ns"] == 300_000_000
    assert run.summary()["step"]["mean_s"] == pytest.approx(0.011)
    # the first step (300 ms of start-up, then 10 ms of loop) is left out; the rest: 1 + 10 ms
    assert run.step_ns[0] == 310_000_000 and run.steady_step_s() == pytest.approx([0.011] * 29)


@pytest.mark.slow
@retry_once
def test_a_compute_bound_loop_with_workers_is_not_input_bound_at_default_settings():
    # workers take ~0.25 s to start; each batch is ready long before the 60 ms step needs it
    # (handing a batch over from a worker costs ~1 ms in the main process: under 5 %)
    for warmup in (10, 0):
        loader = DataLoader(SleepyItems(120, 0.001), batch_size=4, num_workers=2)
        res = run_pair(
            loader, sleep_steps(0.06), RunSettings(steps=30, warmup=warmup, num_cached_batches=4)
        )
        d = res.diagnosis
        with excused_if_busy(d):
            assert d.verdict == NOT_INPUT_BOUND, (warmup, str(d))
        assert d.real_startup_s is not None and "start-up (to the first batch)" in str(d)


FRESH = textwrap.dedent(
    """
    import json, sys, time, torch
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __init__(self, item_s):
            self.item_s = item_s
        def __len__(self):
            return 4000
        def __getitem__(self, i):
            time.sleep(self.item_s)
            return torch.zeros(2)

    item_s, step_s, steps, warmup = (float(sys.argv[1]), float(sys.argv[2]), 60, 5)

    def loader():
        return DataLoader(Items(item_s), batch_size=1, num_workers=2)

    def stopwatch():  # an independent stopwatch on the same loop, no tool
        stamps = []
        for k, _ in enumerate(loader()):
            stamps.append(time.perf_counter())
            if k == steps:
                break
            time.sleep(step_s)
        steady = [b - a for a, b in zip(stamps, stamps[1:])][warmup:]
        return sum(steady) / len(steady)

    def tool():
        from loadeval_nb import LoaderEvaluator  # the first time: the first evaluator

        ev = LoaderEvaluator(loader(), steps=steps, warmup=warmup)
        for _ in ev:
            time.sleep(step_s)
        ev.close()
        return ev.to_run().summary()["step"]["mean_s"]

    # A B B A: the stopwatch before the tool is even imported, then the first evaluator
    # of this process, a second one, the stopwatch again
    out = {"stopwatch": [stopwatch()], "tool": [tool()]}
    out["tool"].append(tool())
    out["stopwatch"].append(stopwatch())
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize(
    ("item_s", "step_s"),
    [(0.040, 0.010), (0.004, 0.020)],
    ids=["input-bound", "compute-bound"],
)
@pytest.mark.slow
@retry_once
def test_the_first_evaluator_of_a_fresh_process_reads_like_a_stopwatch(item_s, step_s):
    out = subprocess.run(
        [sys.executable, "-c", FRESH, str(item_s), str(step_s)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = Interleaved(**json.loads(out.stdout.strip().splitlines()[-1]))
    assert got.ratio == pytest.approx(1.0, rel=0.03), str(got)
    # the first evaluator of the process alone, against the stopwatch around it
    first = got.tool[0] / statistics.fmean(got.stopwatch)
    assert first == pytest.approx(1.0, rel=0.05), str(got)


# ---- the per-step split: input wait, host-to-device copies, compute -------------------------


class FakeEvent:
    """A timing event on a fake clock: ``record()`` reads it, ``elapsed_time`` in ms."""

    clock = None

    def record(self):
        self.t = FakeEvent.clock()

    def elapsed_time(self, end):
        return (end.t - self.t) / 1e6


def test_copies_are_wrapped_only_during_an_epoch_and_put_back(tmp_path, clock, monkeypatch):
    # "meta" stands for "cuda" on this CPU-only machine; the events run on a fake clock
    FakeEvent.clock = clock
    to_before, cuda_before = torch.Tensor.to, torch.Tensor.cuda
    path = tmp_path / "run.json"
    ev = LoaderEvaluator(
        [torch.zeros(4) for _ in range(12)],
        clock=clock,
        sample_interval_s=None,
        metrics_file=str(path),
    )
    monkeypatch.setattr(copies, "COPIES_ON", ("meta", FakeEvent))
    with pytest.raises(RuntimeError, match="the user's error"):
        for k, batch in enumerate(ev):
            assert torch.Tensor.to is not to_before  # wrapped while the epoch runs
            assert batch.to("meta").device.type == "meta"  # the copy still happens
            assert batch.to(torch.float64).dtype == torch.float64  # not a copy: not timed
            clock.advance(1_000_000)
            if k == 5:
                raise RuntimeError("the user's error")
    assert torch.Tensor.to is to_before and torch.Tensor.cuda is cuda_before  # put back
    ev.close()
    run = load_run(path)
    assert run.h2d_ns == [0] * 6  # one timed copy a step (zero long on this fake clock)


def test_copy_time_lands_in_its_step_and_in_the_verdict(tmp_path, clock, monkeypatch):
    marks = iter([0, 3, 0, 1, 0, 2] * 10)

    class Copy(FakeEvent):
        def record(self):
            clock.advance(next(marks) * 1_000_000)  # begin: 0, end: k ms later
            self.t = clock()

    ev = LoaderEvaluator(
        [torch.zeros(4) for _ in range(30)], clock=clock, sample_interval_s=None, warmup=0
    )
    monkeypatch.setattr(copies, "COPIES_ON", ("meta", Copy))
    for batch in ev:
        batch.to("meta")
        clock.advance(4_000_000)
    run = ev.to_run()
    assert run.h2d_ns[:3] == [3_000_000, 1_000_000, 2_000_000]
    assert run.steady_h2d_s() == pytest.approx([0.001, 0.002] + [0.003, 0.001, 0.002] * 9)
    replay = LoaderEvaluator(
        [torch.zeros(4)], mode="replay", steps=30, clock=clock, sample_interval_s=None
    )
    for _ in replay:
        clock.advance(3_000_000)
    from loadeval_nb import diagnose

    d = diagnose(run, replay.to_run())
    assert d.real_h2d_s == pytest.approx(0.002, rel=0.05)
    assert "host-to-device copies 2.0 ms" in str(d)


def test_on_cpu_no_copy_is_timed_and_the_split_is_null():
    ev = LoaderEvaluator([torch.zeros(4)] * 5, sample_interval_s=None)
    to_before = torch.Tensor.to
    for batch in ev:
        assert torch.Tensor.to is to_before  # nothing wrapped without CUDA
        batch.to("cpu")
    run = ev.to_run()
    assert run.h2d_ns is None and run.to_dict()["steps"]["h2d_ns"] is None


def test_overlapping_epochs_share_the_wrappers_and_put_them_back(clock, monkeypatch):
    FakeEvent.clock = clock
    to_before = torch.Tensor.to
    a = LoaderEvaluator([torch.zeros(2)] * 4, clock=clock, sample_interval_s=None)
    b = LoaderEvaluator([torch.zeros(2)] * 6, clock=clock, sample_interval_s=None)
    monkeypatch.setattr(copies, "COPIES_ON", ("meta", FakeEvent))
    open_b = iter(b)
    for x in a:  # a's epoch ends first, while b's is still open
        next(open_b)
        x.to("meta")
    assert torch.Tensor.to is not to_before  # b's epoch still times copies
    del open_b
    b.close()
    assert torch.Tensor.to is to_before and "to" not in torch.Tensor.__dict__
    assert a.to_run().h2d_ns == [0] * 4
