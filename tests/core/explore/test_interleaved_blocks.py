"""Issue 20, item 2: ladders and sweeps measured so that drift cannot make a stage or a
"× current". A sweep runs the ideal and every configuration in two blocks in mirrored
order; a rung or configuration whose two blocks disagree beyond their noise is "within
noise", never the largest stage or the recommendation; "× current" only from blocks
measured interleaved with the current setting. On a fake clock: exact, no sleeping."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb.core._stats import blocks_disagree
from loadeval_nb.core.explore import (
    RunHooks,
    RunSettings,
    SweepHooks,
    run_ladder,
    run_pair,
    run_sweep,
)
from tests.workloads import SleepyItems, take

SETTINGS = dict(steps=60, warmup=4, num_cached_batches=4, sample_interval_s=None)


def jitter(k: int) -> float:
    """A small, fixed spread of step times (blocks need a noise to be weighed by)."""
    return 0.0002 * ((k * 7) % 5)


def test_blocks_disagree_only_beyond_their_noise():
    a = [0.100 + 0.001 * (k % 5) for k in range(30)]
    assert not blocks_disagree([a, [x * 1.01 for x in a]])  # 1 %: too small to matter
    assert blocks_disagree([a, [x * 1.12 for x in a]])
    noisy = [0.05 + 0.1 * (k % 2) for k in range(10)]
    assert not blocks_disagree([noisy, [x * 1.12 for x in noisy]])  # within their noise
    assert not blocks_disagree([a])


def test_a_sweep_runs_in_mirrored_blocks_and_says_times_current_from_them(fake_time):
    order = []

    class Hooks(SweepHooks):
        def run_started(self, which, ev, index, total):
            order.append(ev.label if which == "real" else which)

    # pin_memory changes nothing here; the step is the same for every configuration
    dl = DataLoader(SleepyItems(4000, 0.002, fake_time), batch_size=1)

    def run_once(ev):
        for k, _ in enumerate(ev):
            take(0.010 + jitter(k), fake_time)

    res = run_sweep(dl, run_once, "pin_memory=False,True", RunSettings(**SETTINGS), hooks=Hooks())
    assert order == [
        "ideal",
        "pin_memory=False",
        "pin_memory=True",
        "pin_memory=True",
        "pin_memory=False",
        "ideal",
    ]
    assert res.blocks == 2
    assert all(p.repeats == 2 and not p.within_noise for p in res.points)
    assert len(res.ideal.blocks) == 2
    # the same speed: the cheaper setting, which is the current one, and no "× current"
    text = res.recommendation()
    assert res.best.label == "pin_memory=False" and "the current setting" not in text, text


def test_a_configuration_whose_blocks_disagree_is_never_recommended(fake_time):
    """num_workers... here pin_memory=True reads fast in its first block and slow in its
    second (outside load arriving): it is within noise, and the steady one is chosen."""
    dl = DataLoader(SleepyItems(4000, 0.002, fake_time), batch_size=1)
    state = {"label": None, "seen": {}}

    class Hooks(SweepHooks):
        def run_started(self, which, ev, index, total):
            state["label"] = ev.label if which == "real" else which
            state["seen"][state["label"]] = state["seen"].get(state["label"], 0) + 1

    def run_once(ev):
        label = state["label"]
        for k, _ in enumerate(ev):
            step = 0.010 + jitter(k)
            if label == "pin_memory=True":
                # 30 % faster in its first block, 30 % slower in its second
                step *= 0.7 if state["seen"][label] == 1 else 1.3
            take(step, fake_time)

    res = run_sweep(dl, run_once, "pin_memory=False,True", RunSettings(**SETTINGS), hooks=Hooks())
    noisy = next(p for p in res.points if p.label == "pin_memory=True")
    steady = next(p for p in res.points if p.label == "pin_memory=False")
    assert noisy.within_noise and not steady.within_noise
    assert res.best is steady
    rows = {r[0]: r for r in res.facts().rows}
    assert "within noise" in rows["pin_memory=True"][1]


def test_a_ladder_rung_whose_blocks_disagree_is_within_noise_never_the_largest(fake_time):
    """The compute-bound ladder of issue 20: no input stage at all, but the host rung's
    two blocks read 10 and 11.5 ms (the machine slowed while it ran); before, the
    difference made a "largest stage"."""
    dl = DataLoader(SleepyItems(4000, 0.0, fake_time), batch_size=1)
    state = {"which": None, "seen": {}}

    class Hooks(RunHooks):
        def run_started(self, which, ev, index, total):
            state["which"] = which
            state["seen"][which] = state["seen"].get(which, 0) + 1

    def run_once(ev):
        which = state["which"]
        for k, _ in enumerate(ev):
            step = 0.010 + jitter(k)
            if which == "host" and state["seen"]["host"] == 2:
                step *= 1.15
            take(step, fake_time)

    res = run_ladder(dl, run_once, RunSettings(**{**SETTINGS, "steps": 100}), hooks=Hooks())
    host = res.rung("host")
    assert host.disagrees()
    assert res.largest is None, res.text()
    assert all(not s.significant for s in res.stages if s.within_noise)
    assert any("host rung's blocks read" in n and "within noise" in n for n in res.notes)


def test_a_steady_ladder_still_finds_its_stage(fake_time):
    # loading 4 ms a batch in the main process, step 10 ms: the real rung adds 4 ms
    dl = DataLoader(SleepyItems(4000, 0.004, fake_time), batch_size=1)

    def run_once(ev):
        for k, _ in enumerate(ev):
            take(0.010 + jitter(k), fake_time)

    res = run_ladder(dl, run_once, RunSettings(**{**SETTINGS, "steps": 100}))
    assert not any(r.disagrees() for r in res.rungs if r.run is not None)
    assert res.largest is not None and res.largest.added_s == pytest.approx(0.004, rel=0.05)


def test_every_rank_of_a_torchrun_job_stamps_its_logs_alike(monkeypatch):
    """Ranks that reach the runner a second apart must not become two jobs: under torchrun
    the job's run id is the stamp."""
    from loadeval_nb.core.explore.runner import job_stamp

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")  # (torchrun sets both: RANK alone is no rank)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "3f2a/b c")
    assert job_stamp() == "job-3f2a_b_c"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's default rdzv-id
    assert job_stamp()[:2] == "20"
    monkeypatch.delenv("RANK")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "3f2a")
    assert job_stamp()[:2] == "20"  # not a rank: the clock


def test_a_pair_made_after_the_fact_names_the_missing_run_and_takes_the_verdict_given():
    from loadeval_nb.core.explore import PairResult
    from loadeval_nb.core.record import Run
    from loadeval_nb.core.verdict import diagnose

    real = Run(mode="log", start_ns=[0, 5], step_ns=[5, 5], loader_settings={"num_workers": 2})
    ideal = Run(mode="replay", start_ns=[0, 1], step_ns=[1, 1])
    crashed = PairResult.from_runs(real, ideal, label="x", diagnosis=None)
    assert crashed.diagnosis is None and crashed.failed is None  # no verdict it was not given
    assert crashed.loader_settings == {"num_workers": 2}
    half = PairResult.from_runs(real, None, label="x", diagnosis=None, log_paths={"real": "r"})
    assert half.failed == "ideal" and half.log_paths == {"real": "r"}
    whole = PairResult.from_runs(real, ideal, label="x", diagnosis=diagnose(real, ideal))
    assert whole.diagnosis is not None and whole.runs() == {"real": real, "ideal": ideal}


def test_a_pair_without_steps_over_a_one_batch_epoch_says_why_it_ran_whole_runs():
    # (it said "whole runs", the planner's sentinel, as a note of the verdict)
    loader = DataLoader(TensorDataset(torch.zeros(4, 3)), batch_size=4)
    settings = RunSettings(steps=None, warmup=0, num_cached_batches=1, sample_interval_s=None)
    res = run_pair(loader, lambda ev: [None for _ in ev], settings)
    assert res.ok and res.diagnosis is not None and res.diagnosis.noted == ["sequential"]
    assert res.diagnosis.notes == [
        "the pair ran its real run, then its ideal run, because no steps were given and the "
        "loader's epoch has none to split into blocks: a drift of the machine between the two "
        "runs is in the difference"
    ]
