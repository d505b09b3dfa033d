"""Issue 20: a pair's real and ideal steps interleaved in blocks in one loop (A B B A), on
one start of the loader, so that a drift of the machine lands on both sides.

What can be is checked on an injected clock (exact, on a busy machine too): the order of
the blocks, which batches each step gets, the steps left out at each change of side,
the drift that a run-then-run pair gets wrong and the interleaved pair gets right, the
note for blocks that disagree. One ground truth sleeps (the drifting one), against an
interleaved stopwatch."""

from __future__ import annotations

import os
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError, RunSettings, run_pair
from loadeval_nb.core.measure.interleave import plan_blocks
from loadeval_nb.explore import RunHooks
from tests.timing import abba, retry_once
from tests.workloads import FakeGPU, SleepyItems, take


class Counted(Dataset):
    """Items ``i`` (a tensor of one ``i``), each taking ``item_s`` on the clock; counts the
    loader starts it sees (``iter()`` of a DataLoader without workers reads item 0 of a
    fresh pass first)."""

    def __init__(self, n: int, item_s: float, clock=None) -> None:
        self.n, self.item_s, self.clock = n, item_s, clock

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        take(self.item_s, self.clock)
        return torch.tensor([float(i)])


def test_the_blocks_go_real_ideal_ideal_real_and_each_step_gets_its_sides_batch(clock):
    loader = DataLoader(Counted(1000, 0.0, clock), batch_size=1)
    ev = LoaderEvaluator(
        loader,
        mode="pair",
        steps=50,
        warmup=4,
        num_cached_batches=5,
        sample_interval_s=None,
        clock=clock,
        representative=False,  # the cache: the first five (test_representative_cache.py)
    )
    plan = ev.plan
    assert plan.order()[:4] == ["real", "ideal", "ideal", "real"]
    served = [int(b.item()) for b in ev]
    ev.close()
    assert len(served) == len(ev) == plan.total_steps
    # walk the plan: real steps take the loader's next batch, ideal ones the cached
    # copies of the first five, in turn
    want, nxt, cached = [], 0, 0
    for side, n, _skip in plan.block_steps():
        for _ in range(n):
            if side == "real":
                want.append(nxt)
                nxt += 1
            else:
                want.append(cached % 5)
                cached += 1
    assert served == want
    runs = ev.to_runs()
    real, ideal = runs["real"], runs["ideal"]
    assert real.mode == "log" and ideal.mode == "replay"
    assert len(real.blocks) == len(ideal.blocks) == plan.blocks
    # the first real block leaves out its warm-up (at least the cache's batches); a block
    # after the other side's leaves out its drain; one that goes on the same side, nothing
    # after the other side's leaves out the batches that came early from the loader's queue
    # (none here: no workers, no queue); one that goes on the same side, nothing
    skips = [e["warmup"] for e in real.blocks]
    assert skips[0] == max(4, 5) and skips[1] == 0 and skips[2] == 0
    assert [e["warmup"] for e in ideal.blocks][:2] == [plan.settle, 0]
    assert len(ideal.steady_step_s()) == plan.blocks * plan.block
    assert len(real.steady_step_s()) == plan.blocks * plan.block + plan.drain * plan.blocks // 2


@pytest.mark.slow
@retry_once  # worker processes in real time: a busy machine excuses a slow hand-over
def test_a_real_block_after_an_ideal_one_leaves_out_the_batches_its_queue_held():
    """Two workers, prefetch 2: four batches wait in the queue when an ideal block ends, and
    the workers get ahead while those are served; the block is steady from the first step
    that waited for its batch."""
    loader = DataLoader(SleepyItems(4000, 0.010), batch_size=2, num_workers=2)
    ev = LoaderEvaluator(
        loader, mode="pair", steps=60, warmup=4, num_cached_batches=4, sample_interval_s=None
    )
    for _ in ev:
        take(0.002)  # input-bound: 20 ms a batch a worker, 10 ms with two: ~8 ms waits
    ev.close()
    real = ev.to_runs()["real"]
    after_ideal = [e["warmup"] for e in real.blocks][1::2]
    assert all(4 <= w <= ev.plan.drain for w in after_ideal), (after_ideal, ev.plan)
    # the steps left out came from the queue (a hand-over, no wait for a worker); the
    # first kept one waited. Compared with the block's own steady waits, not a fixed
    # number of ms: a hand-over across processes costs more on a slow machine.
    for e, w in zip(range(1, len(real.blocks), 2), after_ideal):
        block = [x for x, ep in zip(real.wait_ns, real.block) if ep == e]
        queued, steady = block[:4], block[w:]
        # the two workers deliver in pairs: waits alternate ~16 ms / ~0.6 ms, ~8 ms a step
        assert steady and max(queued) < sum(steady) / len(steady) / 2, (queued, steady)
        if w < ev.plan.drain:  # found a step that waited: the block is steady from it
            assert block[w] > 2 * sorted(queued)[1], (w, block)


def test_the_loader_starts_once_and_the_cache_holds_its_first_batches(clock):
    starts = []

    class Loader:
        def __len__(self):
            return 500

        def __iter__(self):
            starts.append(1)
            return iter([torch.tensor([float(i)]) for i in range(500)])

    ev = LoaderEvaluator(
        Loader(),
        mode="pair",
        steps=40,
        warmup=2,
        num_cached_batches=3,
        sample_interval_s=None,
        clock=clock,
        representative=False,  # (else later batches take cached ones' places)
    )
    for _ in ev:
        pass
    assert len(starts) == 1
    assert [int(b.item()) for b in ev.cache.batches] == [0, 1, 2]
    ev.release()
    assert ev.cache.batches == []


def drifting_pair(clock, interleave: bool, load_s=0.002, step_s=0.010, drift=0.2):
    """A loop whose step grows by ``drift`` over the pair (step k of K takes step_s × (1 +
    drift × k / K)), its loader ``load_s`` a batch in the loop's process. Returns the
    result and the truth: mean real step over mean ideal step across the same steps."""
    loader = DataLoader(SleepyItems(10_000, load_s, clock), batch_size=1)
    settings = RunSettings(
        steps=200, warmup=10, num_cached_batches=10, sample_interval_s=None, interleave=interleave
    )
    total = {"k": 0, "K": 1}

    def run_once(ev):
        for _ in ev:
            total["k"] += 1
            take(step_s * (1 + drift * min(1.0, total["k"] / total["K"])), clock)

    run_pair(loader, run_once, settings)  # counts the loop's steps: the drift spans them all
    total["K"], total["k"] = total["k"], 0
    res = run_pair(loader, run_once, settings)
    mean_step = step_s * (1 + drift / 2)
    return res, (load_s + mean_step) / mean_step


def test_a_drift_lands_on_both_sides_when_interleaved_and_not_run_after_run(fake_time):
    res, truth = drifting_pair(fake_time, interleave=True)
    d = res.diagnosis
    assert d.speedup == pytest.approx(truth, rel=0.02), d
    assert any("interleaved in 8 blocks" in n for n in d.notes), d.notes
    assert d.speedup_ci[0] <= truth <= d.speedup_ci[1] * 1.01
    # the same pair run one side after the other: the real run sees the early, quicker
    # steps and the ideal run the late ones, and the speedup comes out wrong
    seq, truth = drifting_pair(fake_time, interleave=False)
    assert abs(seq.diagnosis.speedup / truth - 1) > 0.05, seq.diagnosis


def test_blocks_that_disagree_beyond_their_noise_are_said(fake_time):
    clock = fake_time
    loader = DataLoader(TensorDataset(torch.zeros(5000, 1)), batch_size=1)
    seen = {"k": 0}

    class Slowing:
        """Loading costs 2 ms for the first half of the pair, then 8 ms, with a small
        spread so that each block has a noise to weigh it by."""

        def __init__(self, ev):
            self.it = iter(ev)

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.it)

    def run_once(ev):
        for k, _ in enumerate(ev):
            seen["k"] += 1
            take(0.010 + 0.0001 * (k % 3), clock)
            if ev.side_at(clock()) == "real":
                take(0.002 if k < 200 else 0.008, clock)

    settings = RunSettings(steps=200, warmup=10, num_cached_batches=10, sample_interval_s=None)
    d = run_pair(loader, run_once, settings).diagnosis
    note = next((n for n in d.notes if "disagree beyond their noise" in n), None)
    assert note is not None, d.notes
    assert "blocks disagree" in note
    ratios = sorted(
        float(x.rstrip("×")) for x in note.split("(speedup ")[1].split(")")[0].split(" to ")
    )
    assert ratios[0] < 1.25 < ratios[1]


def test_the_notebook_hooks_see_one_interleaved_run(fake_time):
    seen = []

    class Hooks(RunHooks):
        def run_started(self, which, ev, index, total):
            seen.append((which, index, total, len(ev)))

    loader = DataLoader(SleepyItems(2000, 0.001, fake_time), batch_size=1)
    settings = RunSettings(steps=60, warmup=5, num_cached_batches=5, sample_interval_s=None)
    res = run_pair(loader, lambda ev: [take(0.002, fake_time) for _ in ev], settings, hooks=Hooks())
    assert [s[:3] for s in seen] == [("pair", 0, 1)]
    assert res.real.n_steps and res.ideal.n_steps
    assert res.diagnosis.speedup == pytest.approx(1.5, rel=0.01)


def test_a_loader_too_short_to_interleave_runs_the_sides_in_turn_and_says_so(fake_time):
    loader = DataLoader(SleepyItems(20, 0.001, fake_time), batch_size=1)
    settings = RunSettings(steps=200, warmup=5, num_cached_batches=5, sample_interval_s=None)
    d = run_pair(loader, lambda ev: [take(0.002, fake_time) for _ in ev], settings).diagnosis
    assert any("an epoch of the loader has 20 batches" in n for n in d.notes), d.notes
    assert not any("more steps" in n for n in d.notes), d.notes  # the epoch is the limit
    assert plan_blocks(200, 5, 5, 0, loader_len=20) is None


def test_run_logs_of_both_sides_are_written_block_by_block(fake_time, tmp_path):
    loader = DataLoader(SleepyItems(2000, 0.001, fake_time), batch_size=1)
    settings = RunSettings(
        steps=60, warmup=5, num_cached_batches=5, sample_interval_s=None, log_dir=str(tmp_path)
    )
    res = run_pair(loader, lambda ev: [take(0.002, fake_time) for _ in ev], settings)
    names = sorted(os.listdir(tmp_path))
    assert any(n.endswith("-real.json") for n in names) and any(
        n.endswith("-ideal.json") for n in names
    ), names
    from loadeval_nb import load_run

    real = load_run(res.log_paths["real"])
    assert real.n_steps == res.real.n_steps and len(real.blocks) == len(res.real.blocks)
    assert real.steady_step_s() == res.real.steady_step_s()  # each block's own warm-up kept


def test_a_loop_that_breaks_keeps_what_it_measured(fake_time):
    loader = DataLoader(SleepyItems(2000, 0.001, fake_time), batch_size=1)

    def run_once(ev):
        for k, _ in enumerate(ev):
            take(0.002, fake_time)
            if k == 70:
                break

    settings = RunSettings(steps=100, warmup=5, num_cached_batches=5, sample_interval_s=None)
    res = run_pair(loader, run_once, settings)
    assert res.real is not None and res.real.n_steps > 0
    assert res.real.status == "stopped" or res.ideal.status == "stopped"


def test_bad_input_to_the_interleaved_wrapper_is_one_sentence():
    with pytest.raises(LoadEvalError, match="iterable of batches"):
        LoaderEvaluator(42, mode="pair")
    # (9 batches: too few for blocks, and for the loop's epochs after a warm-up of 2)
    with pytest.raises(LoadEvalError, match="an epoch of the loader has 9 batches"):
        LoaderEvaluator(list(range(9)), mode="pair", steps=12, warmup=2)
    with pytest.raises(LoadEvalError, match="12 steps a side are too few"):
        LoaderEvaluator(list(range(1000)), mode="pair", steps=12, warmup=2)
    with pytest.raises(LoadEvalError, match="blocks must be an integer >= 2"):
        LoaderEvaluator(list(range(1000)), mode="pair", blocks=0)
    with pytest.raises(LoadEvalError, match="blocks must be an even number"):
        LoaderEvaluator(list(range(1000)), mode="pair", blocks=3)
    with pytest.raises(LoadEvalError, match="cache_on"):
        LoaderEvaluator(list(range(1000)), mode="pair", cache_on="banana")
    with pytest.raises(LoadEvalError, match="interleave must be True or False"):
        RunSettings(interleave="yes")


@pytest.mark.slow
@retry_once  # a ground truth that sleeps: retried once, a busy machine excuses it
def test_a_drifting_sleep_truth_is_measured_within_five_percent():
    """The step sleeps 10 ms growing to 12 ms over the pair; the loader 2 ms a batch in the
    loop's process (no workers): truth ≈ (2 + 11) / 11 ≈ 1.18×, the text pipeline of
    issue 20. Truth taken by a stopwatch on the same drift, real and cached loops in A B B A
    blocks; the tool's interleaved pair within 5 %."""
    res, truth = drifting_pair(None, interleave=True, load_s=0.002, step_s=0.010)
    # the stopwatch: the same drift over as many steps, real and cached in A B B A
    loader = DataLoader(SleepyItems(10_000, 0.002), batch_size=1)
    cache = [b for b, _ in zip(loader, range(10))]
    n, k, K = 45, [0], 4 * 45

    def step():
        k[0] += 1
        take(0.010 * (1 + 0.2 * min(1.0, k[0] / K)))

    it = iter(loader)

    def block(side: str):
        def timed() -> float:
            t = time.perf_counter()
            for j in range(n):
                _ = next(it) if side == "real" else cache[j % 10]
                step()
            return time.perf_counter() - t

        return timed

    order = abba(block("real"), block("ideal"))  # real, ideal, ideal, real
    watch = sum(order.stopwatch) / sum(order.tool)
    d = res.diagnosis
    # the ground truth: the tool's speedup against the stopwatch's, taken in the same test
    assert d.speedup == pytest.approx(watch, rel=0.05), (d.speedup, watch, truth)
    # the verdict follows the truth: PARTLY (under a 20 % headroom, 1.25x) when the
    # stopwatch is clearly below it; 2 ms sleeps that overshoot on a loaded machine can
    # move the truth itself to the boundary (the full suite once read INPUT-BOUND here)
    if watch < 1.2:
        assert d.verdict == "PARTLY INPUT-BOUND", (d.speedup, watch, d.verdict)


def test_a_loop_that_stops_asking_at_len_is_a_complete_pass(clock):
    # Lightning takes len() batches and never asks for one more: the pass is whole
    loader = DataLoader(Counted(1000, 0.0, clock), batch_size=1)
    ev = LoaderEvaluator(
        loader,
        mode="pair",
        steps=50,
        warmup=4,
        num_cached_batches=5,
        sample_interval_s=None,
        clock=clock,
    )
    it = iter(ev)
    for _ in range(len(ev)):
        next(it)
        clock.advance(1_000_000)
    del it
    ev.close()
    runs = ev.to_runs()
    assert runs["real"].status == runs["ideal"].status == "complete"
    # one step fewer than asked for is a stop
    ev = LoaderEvaluator(
        loader,
        mode="pair",
        steps=50,
        warmup=4,
        num_cached_batches=5,
        sample_interval_s=None,
        clock=clock,
    )
    it = iter(ev)
    for _ in range(len(ev) - 1):
        next(it)
    del it
    ev.close()
    assert "stopped" in (ev.to_runs()["real"].status, ev.to_runs()["ideal"].status)


def test_a_full_disk_under_the_pair_is_said_once_and_both_sides_are_kept(
    clock, tmp_path, caplog, monkeypatch
):
    # the pair writes its logs through the evaluator's writer: a failure is a warning,
    # once, not dropped silently (it was), and each side's run stays in memory
    import logging

    import loadeval_nb.core.record.run as run_module

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    files = {s: str(tmp_path / f"{s}.json") for s in ("real", "ideal")}
    ev = LoaderEvaluator(
        list(range(400)),
        mode="pair",
        steps=100,
        warmup=4,
        num_cached_batches=4,
        sample_interval_s=None,
        metrics_files=files,
        clock=clock,
    )
    monkeypatch.setattr(run_module, "save_run", full)
    monkeypatch.setattr(run_module.Run, "save", lambda self, p: full())
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        for _ in ev:
            clock.advance(1_000)
        ev.close()
    said = [r.getMessage() for r in caplog.records if "could not write" in r.getMessage()]
    assert len(said) == 2, said  # one for each side's file
    assert {f for f in files.values() if any(f in m for m in said)} == set(files.values())
    runs = ev.to_runs()
    assert runs["real"].n_steps > 0 and runs["ideal"].n_steps > 0


def test_every_wrapper_is_read_live_the_same_way(clock):
    # one reading for a dashboard: sides, steps_since(side, cursor), side_at, to_run(side)

    one = LoaderEvaluator(list(range(30)), sample_interval_s=None, clock=clock)
    pair = LoaderEvaluator(
        list(range(400)),
        mode="pair",
        steps=100,
        warmup=4,
        num_cached_batches=4,
        sample_interval_s=None,
        clock=clock,
    )
    assert one.sides == ("real",) and pair.sides == ("real", "ideal")
    assert one.side_at(0) is None and pair.side_at(0) is None  # nothing ran yet
    for ev in (one, pair):
        for _ in ev:
            clock.advance(2_000)
        ev.close()
    assert one.steps_since("real", (0, 0)) == one.steps_since((0, 0))
    assert one.to_runs() == {"real": one.to_run("real")}
    with pytest.raises(LoadEvalError, match="real side, not 'ideal'"):
        one.steps_since("ideal", (0, 0))
    for ev in (one, pair):
        for side in ev.sides:
            steps, cursor = ev.steps_since(side, (0, 0))
            run = ev.to_run(side)
            assert steps == run.step_ns and cursor[0] == len(run.blocks), side
            assert ev.steps_since(side, cursor) == ([], cursor)  # nothing new: nothing read
    # the clock time of each side's block says which side ran then
    for side in pair.sides:
        first = pair.to_run(side).start_ns[-1] + pair.started_ns
        assert pair.side_at(first) == side
    assert len(pair.cached_batches) == 4


def test_the_pair_checks_the_settings_it_shares_with_a_run_as_a_run_does():
    # one set of checks for every wrapper: the pair took these without a word before
    data = list(range(1000))
    with pytest.raises(LoadEvalError, match="label must be a string"):
        LoaderEvaluator(data, mode="pair", label=3)
    with pytest.raises(LoadEvalError, match="cache_budget_bytes"):
        LoaderEvaluator(data, mode="pair", cache_budget_bytes=-1)
    with pytest.raises(LoadEvalError, match="sample_interval_s"):
        LoaderEvaluator(data, mode="pair", sample_interval_s=-0.1)

    pair = LoaderEvaluator(data, mode="pair", sample_interval_s=None)
    with pytest.raises(LoadEvalError, match="already a LoaderEvaluator; wrap the original"):
        LoaderEvaluator(pair)
    with pytest.raises(LoadEvalError, match="already a LoaderEvaluator; wrap the original"):
        LoaderEvaluator(LoaderEvaluator(data, sample_interval_s=None), mode="pair")


@pytest.mark.parametrize("events", [True, False])
def test_a_loop_that_runs_ahead_of_its_gpu_is_timed_at_the_gpus_pace(clock, monkeypatch, events):
    """Found by the GPU truth (issue 30): a loop that never reads a result back queues its
    GPU work and goes on, so an ideal block that follows a real one (whose GPU sat idle
    waiting for data) was timed at the pace the host queues work (the pair's ideal step
    0.65x of a hand-timed device-cached loop on an H200). Each block's span on the GPU
    (CUDA events, read at the pass's end) times both sides at the GPU's pace, and the real
    side, whose GPU waits for data, at the host's; without them (``events=False``) the same
    loop is timed wrong, which is what this proves."""
    from loadeval_nb.core.measure import interleave
    from loadeval_nb.verdict import diagnose

    gpu = FakeGPU(clock, host_ns=500_000, gpu_ns=5_000_000, depth=12)
    timer = interleave.CopyTimer
    monkeypatch.setattr(interleave, "cuda_in_use", lambda: True)
    monkeypatch.setattr(interleave, "cuda_synchronize", gpu.synchronize)
    monkeypatch.setattr(interleave, "CopyTimer", lambda st, kind, _: timer(st, kind, gpu.event))
    if not events:
        monkeypatch.setattr(interleave, "_gpu_tail", lambda *a: None)
    loader = DataLoader(Counted(10_000, 0.008, clock), batch_size=1)  # 8 ms a batch
    ev = LoaderEvaluator(
        loader,
        mode="pair",
        steps=200,
        warmup=5,
        num_cached_batches=5,
        sample_interval_s=None,
        clock=clock,
    )
    for _ in ev:
        gpu.step()
    ev.close()
    runs = ev.to_runs()
    d = diagnose(runs["real"], runs["ideal"])
    # the truth: real steps wait 8 ms for data and queue for 0.5 ms (the GPU keeps up);
    # ideal steps go at the GPU's 5 ms
    assert d.real_step_s == pytest.approx(0.0085, rel=0.01)
    if events:
        assert d.ideal_step_s == pytest.approx(0.005, rel=0.01)
        assert d.speedup == pytest.approx(1.7, rel=0.02)
        assert gpu.syncs == 1  # the pass's closing one: nothing waits on the way
    else:
        assert d.ideal_step_s < 0.0045  # the ideal timed at the host's pace: wrong
