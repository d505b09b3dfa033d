"""Timing arithmetic with an injected fake clock: exact numbers, no sleeping."""

from __future__ import annotations

import pytest

import loadeval_nb.core.measure.oneside as ev_mod
from loadeval_nb import LoaderEvaluator

MS = 1_000_000


class SlowSource:
    """An iterable whose batches take `load_ns` of (fake) time each; iter() costs `setup_ns`."""

    def __init__(self, clock, n, load_ns, setup_ns=0, fail_at=None):
        self.clock, self.n, self.load_ns, self.setup_ns, self.fail_at = (
            clock,
            n,
            load_ns,
            setup_ns,
            fail_at,
        )
        self.pulled = 0

    def __len__(self):
        return self.n

    def __iter__(self):
        self.clock.advance(self.setup_ns)
        return self._gen()

    def _gen(self):
        for i in range(self.n):
            if self.fail_at is not None and i == self.fail_at:
                raise RuntimeError("corrupt sample")
            self.clock.advance(self.load_ns)
            self.pulled += 1
            yield [i, i]


def make(clock, src, **kw):
    kw.setdefault("sample_interval_s", None)
    return LoaderEvaluator(src, clock=clock, **kw)


def test_log_mode_wait_and_step_exact(clock):
    ev = make(clock, SlowSource(clock, 5, 3 * MS))
    for _ in ev:
        clock.advance(7 * MS)
    run = ev.to_run()
    assert run.wait_ns == [3 * MS] * 5
    assert run.step_ns == [10 * MS] * 5
    assert run.start_ns == [0, 10 * MS, 20 * MS, 30 * MS, 40 * MS]
    assert run.status == "complete" and all(run.complete)
    m = ev.get_metrics()
    assert m["total_batches"] == 5
    assert m["total_time"] == pytest.approx(0.050)
    assert m["avg_batch_time"] == pytest.approx(0.003)
    assert m["avg_step_time"] == pytest.approx(0.010)
    assert m["wait_share"] == pytest.approx(0.3)


def test_setup_time_of_iter_is_charged_to_first_step(clock):
    ev = make(clock, SlowSource(clock, 3, 2 * MS, setup_ns=50 * MS))
    for _ in ev:
        clock.advance(8 * MS)
    run = ev.to_run()
    assert run.wait_ns == [52 * MS, 2 * MS, 2 * MS]
    assert run.step_ns == [60 * MS, 10 * MS, 10 * MS]


def test_break_gives_non_negative_totals_and_flags_last_step(clock):
    ev = make(clock, SlowSource(clock, 10, 3 * MS))
    for k, _ in enumerate(ev):
        clock.advance(7 * MS)
        if k == 2:
            break
    run = ev.to_run()
    assert run.status == "stopped"
    assert run.n_steps == 3
    assert run.step_ns == [10 * MS, 10 * MS, 10 * MS]  # closed when the loop dropped the iterator
    assert run.complete == [True, True, False]
    assert run.steady_indices() == [1]  # step 0 is the start-up; step 2 is unfinished
    m = ev.get_metrics()
    assert m["total_time"] >= 0 and min(m["step_times"]) >= 0
    assert m["status"] == "stopped"


def test_break_before_loop_body_closes_at_break_time(clock):
    ev = make(clock, SlowSource(clock, 10, 3 * MS))
    it = iter(ev)
    next(it)
    clock.advance(4 * MS)
    del it  # the loop dropped its iterator
    run = ev.to_run()
    assert run.step_ns == [7 * MS] and run.complete == [False]


def test_source_error_is_recorded_and_raised(clock):
    src = SlowSource(clock, 10, 3 * MS, fail_at=3)
    ev = make(clock, src)
    with pytest.raises(RuntimeError, match="corrupt sample"):
        for _ in ev:
            clock.advance(7 * MS)
    run = ev.to_run()
    assert run.status == "source-error"
    assert run.step_ns == [10 * MS, 10 * MS, 10 * MS]
    assert all(run.complete)


def test_max_steps_ends_the_epoch(clock):
    src = SlowSource(clock, 100, 1 * MS)
    ev = make(clock, src, steps=4)
    assert len(ev) == 4
    assert sum(1 for _ in ev) == 4
    assert src.pulled == 4
    assert ev.to_run().status == "complete"


def test_warmup_excluded_from_statistics_but_kept(clock):
    ev = make(clock, SlowSource(clock, 6, 1 * MS), warmup=2)
    for k, _ in enumerate(ev):
        clock.advance((90 if k < 2 else 9) * MS)
    run = ev.to_run()
    assert run.n_steps == 6
    assert run.steady_step_s() == pytest.approx([0.010] * 4)
    assert ev.get_metrics()["avg_step_time"] == pytest.approx(0.010)
    assert ev.get_metrics()["total_batches"] == 6


def test_epochs_accumulate_and_warmup_applies_per_epoch(clock):
    ev = make(clock, SlowSource(clock, 3, 1 * MS), warmup=1)
    for _ in range(2):
        for _ in ev:
            clock.advance(4 * MS)
    run = ev.to_run()
    assert run.block == [0, 0, 0, 1, 1, 1]
    assert run.steady_indices() == [1, 2, 4, 5]
    assert [e["status"] for e in run.blocks] == ["complete", "complete"]
    assert run.start_ns[3] == 15 * MS


def test_replay_exact_and_cycles_cache(clock):
    src = SlowSource(clock, 6, 5 * MS)
    ev = make(clock, src, mode="replay", num_cached_batches=2)
    assert src.pulled == 6  # 2 cached; an iterable's own len() is counted, not trusted
    got = []
    for b in ev:
        got.append(b[0])
        clock.advance(4 * MS)
    assert got == [0, 1, 0, 1, 0, 1]
    run = ev.to_run()
    assert run.step_ns == [4 * MS] * 6
    assert run.wait_ns is None
    assert ev.get_metrics()["batch_times"] == [0.0] * 6


def test_replay_break(clock):
    ev = make(clock, SlowSource(clock, 6, 5 * MS), mode="replay", num_cached_batches=2)
    for k, _ in enumerate(ev):
        clock.advance(4 * MS)
        if k == 1:
            break
    run = ev.to_run()
    assert run.step_ns == [4 * MS, 4 * MS] and run.complete == [True, False]


def test_queued_gpu_work_is_waited_for_where_steady_steps_begin_and_at_the_end(clock, monkeypatch):
    syncs = []

    def fake_sync():
        syncs.append(len(syncs))
        clock.advance(6 * MS)  # the GPU still had 6 ms of work queued

    monkeypatch.setattr(ev_mod, "cuda_in_use", lambda: True)
    monkeypatch.setattr(ev_mod, "cuda_synchronize", fake_sync)
    ev = make(clock, SlowSource(clock, 4, 1 * MS))
    for _ in ev:
        clock.advance(2 * MS)
    # twice an epoch, never per step: the warm-up's queued work is charged to its last
    # step (here the start-up step), the epoch's to its last
    assert len(syncs) == 2
    assert ev.to_run().step_ns == [9 * MS, 3 * MS, 3 * MS, 9 * MS]


def test_samples_per_step_with_short_last_batch():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dl = DataLoader(TensorDataset(torch.zeros(100, 2)), batch_size=32)
    ev = LoaderEvaluator(dl, sample_interval_s=None)
    for _ in ev:
        pass
    assert ev.to_run().samples == [32, 32, 32, 4]


def test_empty_log_mode_is_not_an_error(clock):
    ev = make(clock, [])
    assert len(ev) == 0
    assert list(ev) == []
    assert ev.get_metrics() == {}


@pytest.mark.parametrize("catch_up", [True, False])
def test_a_run_ahead_of_its_gpu_is_timed_at_the_gpus_pace_one_run_after_the_other(
    clock, monkeypatch, catch_up
):
    """Found by the GPU truth (issue 30), the sequential form: a loop that never reads a
    result back queues GPU work through its warm-up, and the epoch's closing synchronise
    charged that backlog to the steady steps (a 5 ms GPU step read 6.1 ms over 50 steps).
    The wait where the steady steps begin times it at the GPU's pace; without it
    (``catch_up=False``) the same loop reads slow, which is what this proves."""
    from loadeval_nb.core.measure import timing
    from loadeval_nb.verdict import diagnose
    from tests.workloads import FakeGPU

    gpu = FakeGPU(clock, host_ns=500_000, gpu_ns=5_000_000, depth=12)
    monkeypatch.setattr(ev_mod, "cuda_in_use", lambda: True)
    monkeypatch.setattr(ev_mod, "cuda_synchronize", gpu.synchronize)
    if not catch_up:
        prepare = timing.EpochRecord.prepare
        monkeypatch.setattr(timing.EpochRecord, "prepare", lambda rec, c, _=None: prepare(rec, c))
    runs = {}
    for mode, source in (("log", SlowSource(clock, 60, 8 * MS)), ("replay", list(range(60)))):
        ev = LoaderEvaluator(
            source, mode, 5, steps=50, warmup=10, sample_interval_s=None, clock=clock
        )
        for _ in ev:
            gpu.step()
        ev.close()
        runs[mode] = ev.to_run()
    d = diagnose(runs["log"], runs["replay"])
    if catch_up:
        # the truth: real steps wait 8 ms and queue for 0.5 ms (the GPU keeps up, its last
        # step's 5 ms is the epoch's: 0.1 ms a step over 40), ideal steps go at 5 ms
        assert d.real_step_s == pytest.approx(0.0086, rel=0.01)
        assert d.ideal_step_s == pytest.approx(0.005, rel=0.01)
    else:
        assert d.ideal_step_s > 0.0055  # the warm-up's queued work in the steady steps
