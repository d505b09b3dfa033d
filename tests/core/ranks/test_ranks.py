"""Gathered ranks: straggler and skew from runs whose waits are known (no processes)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from loadeval_nb import LoadEvalError, Run
from loadeval_nb.core.ranks import RankResult, gather_logs, gather_pair
from loadeval_nb.core.ranks.skew import _payload, ranks_result

MS = 1_000_000


def run_of(step_ms, wait_ms, mode="log", n=60, seed=0):
    rng = random.Random(seed)
    steps = [int((step_ms + rng.uniform(-0.5, 0.5)) * MS) for _ in range(n)]
    waits = [int(max(0.0, wait_ms + rng.uniform(-0.5, 0.5)) * MS) for _ in range(n)]
    return Run(
        mode=mode,
        start_ns=[sum(steps[:i]) for i in range(n)],
        step_ns=steps,
        wait_ns=waits if mode == "log" else None,
    )


def rank(r, wait_ms, step_ms=45.0):
    return RankResult(
        rank=r,
        host=f"node{r // 2}",
        real=_payload(run_of(step_ms, wait_ms, seed=r)),
        ideal=_payload(run_of(12.0, 0, mode="replay", seed=10 + r)),
    )


def test_the_rank_that_waits_is_the_straggler():
    rep = ranks_result([rank(1, 32.0), rank(0, 0.2), rank(2, 0.3), rank(3, 0.1)])
    assert [r.rank for r in rep.ranks] == [0, 1, 2, 3]
    assert rep.straggler == 1 and rep.slowest == 1
    assert rep.skew_s == pytest.approx(0.032 - 0.0002, abs=0.001)
    lo, hi = rep.skew_ci
    assert lo < rep.skew_s < hi and lo > 0.030
    assert [r.host for r in rep.ranks] == ["node0", "node0", "node1", "node1"]
    assert rep.text().startswith("4 ranks: rank 1 is a straggler")


def test_equal_waits_name_no_straggler():
    rep = ranks_result([rank(0, 5.0), rank(1, 5.1)])
    assert rep.straggler is None and "no rank holds the others back" in rep.text()


def test_a_rank_without_runs_is_listed_with_why():
    rep = ranks_result([rank(0, 1.0), RankResult(1, "node0", None, None, error="boom")])
    assert rep.straggler is None and rep.text().splitlines()[-1].split() == ["1", "node0", "boom"]


def test_real_runs_alone_still_show_the_straggler():
    # run_pair(..., only="real") on every rank: no pair, no verdict, but the skew is there
    ranks = [rank(0, 0.2), rank(1, 30.0)]
    for r in ranks:
        r.ideal = None
    rep = ranks_result(ranks)
    assert rep.straggler == 1 and rep.diagnoses == {}
    assert "real run only" in rep.text()


@pytest.mark.parametrize("n_ranks", [2, 8, 32])
def test_equal_ranks_name_no_straggler_however_many(n_ranks):
    # identical ranks whose waits vary a lot (exponential, 10 ms mean, 40 ms steps): one
    # of them always waits most, by chance; it must not be called a straggler
    named = 0
    for seed in range(10):
        ranks = []
        for r in range(n_ranks):
            rng = random.Random(seed * 1000 + r)
            n = 200
            waits = [int(rng.expovariate(1 / 10.0) * MS) for _ in range(n)]
            steps = [int(40 * MS)] * n
            real = Run(
                mode="log", start_ns=[i * steps[0] for i in range(n)], step_ns=steps, wait_ns=waits
            )
            ranks.append(RankResult(r, "h", _payload(real), _payload(run_of(12, 0, "replay"))))
        named += ranks_result(ranks).straggler is not None
    assert named <= 1, f"{named} of 10 runs of {n_ranks} equal ranks named a straggler"


def test_gather_needs_torch_distributed():
    class Result:
        error = None

    with pytest.raises(LoadEvalError, match="init_process_group"):
        gather_pair(Result())


def test_adaptive_stop_is_refused_under_torch_distributed():
    import socket

    import torch.distributed as dist

    from loadeval_nb import RunSettings, run_pair
    from loadeval_nb.errors import OptionError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        with pytest.raises(OptionError, match="desynchronises the ranks"):
            run_pair([1, 2, 3], lambda ev: None, RunSettings(steps="auto", warmup=2))
    finally:
        dist.destroy_process_group()


# ---- gathered from the logs the ranks wrote (a process outside their group) -----------------


def write_job(folder, job, waits, *, host="node0"):
    for r, wait_ms in enumerate(waits):
        for which, run in (
            ("real", run_of(45.0, wait_ms, seed=r)),
            ("ideal", run_of(12.0, 0, mode="replay", seed=10 + r)),
        ):
            run.environment["host"] = f"{host}-{r}"
            run.save(folder / f"{job}-{which}-rank{r}.json")


def test_gather_logs_reads_every_ranks_pair_from_a_folder(tmp_path):
    from loadeval_nb.ranks import gather_logs

    write_job(tmp_path, "loadeval-20250101-120000-train", [0.2, 32.0, 0.3])
    (tmp_path / "notes.txt").write_text("not a log")
    rep = gather_logs(tmp_path)
    assert [r.rank for r in rep.ranks] == [0, 1, 2] and rep.straggler == 1
    assert [r.host for r in rep.ranks] == ["node0-0", "node0-1", "node0-2"]
    assert rep.job == "loadeval-20250101-120000-train" and rep.left_out == ()
    assert rep.skew_s == pytest.approx(0.032 - 0.0003, abs=0.001)
    # the same as gathering over torch.distributed gives
    again = ranks_result([rank(r, w) for r, w in enumerate([0.2, 32.0, 0.3])])
    assert rep.skew_ci == again.skew_ci and rep.straggler == again.straggler


def test_gather_logs_takes_the_newest_job_and_names_the_others(tmp_path):
    import os

    from loadeval_nb.ranks import gather_logs

    write_job(tmp_path, "loadeval-old-train", [0.2, 0.3])
    for p in tmp_path.iterdir():
        os.utime(p, (1_000_000, 1_000_000))
    write_job(tmp_path, "loadeval-new-train", [32.0, 0.2])
    rep = gather_logs(tmp_path)
    assert rep.job == "loadeval-new-train" and rep.straggler == 0
    assert rep.left_out == ("loadeval-old-train",)
    assert (
        "gathered the newest job, loadeval-new-train; the folder also holds the logs of 1 "
        "other job (loadeval-old-train)"
    ) in rep.text()


def test_gather_logs_from_paths_and_a_missing_side(tmp_path):
    from loadeval_nb.ranks import gather_logs

    write_job(tmp_path, "job", [0.2, 0.3])
    (tmp_path / "job-ideal-rank1.json").unlink()
    rep = gather_logs(sorted(tmp_path.iterdir()))
    assert rep.ranks[1].error == "no ideal run log" and 1 not in rep.diagnoses
    assert rep.text().splitlines()[-1].split()[-4:] == ["no", "ideal", "run", "log"]
    with pytest.raises(LoadEvalError, match="is not a per-rank run log"):
        gather_logs([tmp_path / "job-real-rank0.json", tmp_path / "real.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoadEvalError, match="No per-rank run logs"):
        gather_logs(tmp_path / "empty")


def test_gather_logs_says_it_cannot_read_a_loop_of_links(tmp_path):
    """Before: "cannot write ... (Too many levels of symbolic links)" for a log it only reads."""
    loop = tmp_path / "job-real-rank0.json"
    loop.symlink_to(loop)
    with pytest.raises(LoadEvalError, match=r"^Cannot read the run log .*symbolic links"):
        gather_logs(tmp_path)


# ---- stragglers: a late phase is not a slow loader (from the second fault round) ----------------


def _rank(rank: int, wait_ms: list[float], load_ms: float, workers: int):
    from loadeval_nb.ranks import RankResult

    n = len(wait_ms)
    step = [int((w + 10) * 1e6) for w in wait_ms]
    run = Run(
        mode="log",
        start_ns=[sum(step[:i]) for i in range(n)],
        step_ns=step,
        wait_ns=[int(w * 1e6) for w in wait_ms],
        samples=[8] * n,
        loader_settings={"num_workers": workers},
        worker_load_ns=[int(load_ms * 1e6)] * 200,
    )
    ideal = Run(
        mode="replay", start_ns=[i * 10_000_000 for i in range(n)], step_ns=[10_000_000] * n
    )
    return RankResult(rank, "h", run.to_dict(), ideal.to_dict())


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_late_phase_among_equal_loaders_is_not_a_straggler(workers):
    from loadeval_nb.core.ranks.skew import ranks_result

    rng = np.random.default_rng(workers)
    # rank 0 waits in next() for a whole run (its batch arrives later: a phase), rank 1 in
    # the all-reduce; both loaders make a batch in the same time
    late = list(12 + rng.normal(0, 0.5, 300))
    early = list(2 + rng.normal(0, 0.3, 300))
    res = ranks_result(
        [_rank(0, late, 32 * workers, workers), _rank(1, early, 32 * workers, workers)]
    )
    assert res.straggler is None and res.skew_s and res.skew_s > 0.005
    assert "a phase of the gradient all-reduce" in res.text()


def test_a_rank_whose_loader_is_slower_is_a_straggler():
    from loadeval_nb.core.ranks.skew import ranks_result

    rng = np.random.default_rng(3)
    slow = list(20 + rng.normal(0, 0.5, 300))
    fast = list(2 + rng.normal(0, 0.3, 300))
    res = ranks_result([_rank(0, fast, 32, 2), _rank(1, slow, 64, 2)])
    assert res.straggler == 1


# -- the straggler proof: judged from blocks, served by a pass (no processes) ----------------


def _blocks(real_ms, free_ms, control_ms=None, pairs=8, noise_ms=0.3, seed=0):
    """A rank's measured blocks, A B C C B A, ``(arm, steps, span_ns)`` as gathered."""
    rng = random.Random(seed)
    arms = ("real", "free") if control_ms is None else ("real", "free", "control")
    ms = {"real": real_ms, "free": free_ms, "control": control_ms}
    out = []
    for k in range(pairs):
        for arm in arms if k % 2 == 0 else arms[::-1]:
            out.append((arm, 10, int((ms[arm] + rng.uniform(-noise_ms, noise_ms)) * 10 * MS)))
    return out


def test_a_rank_whose_loader_holds_the_fleet_is_proven():
    from loadeval_nb.core.ranks.proof import straggler_proof

    blocks = {0: _blocks(45, 13, 45), 1: _blocks(45, 13, 45, seed=1)}
    proof = straggler_proof(blocks, 1, 0, named_by_skew=True)
    assert proof.proven and proof.suspect == 1 and proof.pairs == 8 and proof.world_size == 2
    assert proof.real_step_s == pytest.approx(0.045, abs=4e-4)
    assert proof.free_step_s == pytest.approx(0.013, abs=4e-4)
    assert proof.control_step_s == pytest.approx(0.045, abs=4e-4)
    lo, hi = proof.gain_ci
    assert 0.031 < lo < proof.gain_s < hi < 0.033
    assert 0.031 < proof.excess_ci[0] < proof.excess_s
    assert proof.speedup == pytest.approx(45 / 13, rel=0.03)
    assert set(proof.rank_step_s) == {0, 1}
    assert set(proof.rank_step_s[0]) == {"real", "free", "control"}
    text = proof.text()
    assert "rank 1 is a straggler, proven: with rank 1's loader free, every rank's step" in text
    assert "1 (suspect)" in text and "rank 1's loader free" in text
    assert proof.control == 0  # its step, with rank 0's loader free instead: 45 ms (above)


@pytest.mark.parametrize("named", [True, False])
def test_a_fleet_that_does_not_recover_clears_the_suspect(named):
    from loadeval_nb.core.ranks.proof import straggler_proof

    proof = straggler_proof({0: _blocks(20, 20, 20), 1: _blocks(20, 20, 20, seed=1)}, 0, 1, named)
    assert not proof.proven
    assert proof.gain_ci[0] < 0 < proof.gain_ci[1]
    said = "whatever the skew says" if named else "the rank that waits most"
    assert f"rank 0 is not a straggler ({said})" in proof.text()
    assert "no recovery" in proof.text()


def test_ranks_that_load_alike_gain_alike_and_none_is_a_straggler():
    from loadeval_nb.core.ranks.proof import straggler_proof

    # freeing either rank's loader takes 2.5 ms off (the step waits for whichever rank's
    # batch is late): a real gain, 9 % of the step, but no more than the control's
    blocks = {0: _blocks(27, 24.5, 24.5, seed=2), 1: _blocks(27, 24.5, 24.5, seed=3)}
    proof = straggler_proof(blocks, 0, 1)
    assert proof.gain_ci[0] > 0 and proof.gain_share > 0.05 and not proof.proven
    assert proof.control == 1 and proof.control_step_s == pytest.approx(0.0245, abs=4e-4)
    assert "the ranks load alike" in proof.text()
    # without the control, the same gain would have named it
    assert straggler_proof({0: _blocks(27, 24.5)}, 0).proven


def test_a_gain_too_small_to_matter_proves_nothing():
    from loadeval_nb.core.ranks.proof import straggler_proof

    # 2 % of the step, pinned down tightly: real, but under the 5 % a straggler must cost
    proof = straggler_proof({0: _blocks(50, 49, noise_ms=0.01)}, 0)
    assert proof.gain_ci[0] > 0 and not proof.proven


def test_one_pair_of_blocks_has_no_interval_and_proves_nothing():
    from loadeval_nb.core.ranks.proof import straggler_proof

    proof = straggler_proof({0: _blocks(45, 13, pairs=1)}, 0)
    assert proof.gain_s and proof.gain_ci == (None, None) and not proof.proven


def test_the_suspect_is_the_straggler_else_the_rank_that_waits_most():
    from loadeval_nb.core.ranks.skew import ranks_result

    slow = ranks_result([rank(0, 0.2), rank(1, 32.0), rank(2, 5.0)])
    assert (slow.suspect, slow.runner_up) == (1, 2)
    equal = ranks_result([rank(0, 0.5), rank(1, 0.5)])
    assert equal.straggler is None and equal.suspect == equal.slowest is not None
    assert {equal.suspect, equal.runner_up} == {0, 1}


def _plan():
    from loadeval_nb.core.explore.straggler import ARMS
    from loadeval_nb.core.measure.blocks import BlockPlan

    return BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=ARMS)


@pytest.mark.parametrize("replay_in", ["free", "control", None])
def test_the_pass_serves_cached_batches_in_its_rank_s_arm_only(clock, replay_in):
    from loadeval_nb.core.explore.straggler import run_pass

    # real(3 warm-up + 4), free(1 + 4), control(1 + 4), control(4), free(1 + 4), real(1 + 4)
    plan = _plan()
    assert plan.total_steps == 31
    assert plan.order() == ["real", "free", "control", "control", "free", "real"]
    served = []

    def run_once(batches):
        assert batches.mode == "straggler" and len(batches) == 31
        assert batches.append == loader.append  # the loader's own attributes pass through
        for b in batches:
            served.append(b)
            clock.advance((3 if b < 2 else 10) * MS)  # a cached batch's step: 3 ms

    loader = list(range(100))
    blocks = run_pass(
        loader, run_once, plan, replay_in=replay_in, num_cached_batches=2, clock=clock
    )
    assert [(b.arm, b.steps) for b in blocks] == [
        ("real", 4),
        ("free", 4),
        ("control", 4),
        ("control", 4),
        ("free", 4),
        ("real", 4),
    ]
    cached = [b.arm == replay_in for b in blocks]
    assert [b.step_s for b in blocks] == [0.003 if c else 0.010 for c in cached]
    if replay_in is None:
        assert served == list(range(31))
    else:  # its arm's blocks cycle over the 2 cached batches; the loader drew the rest
        replayed = 10 if replay_in == "free" else 9  # (a block's left-out steps too)
        assert served.count(0) + served.count(1) == 2 + replayed
        assert sorted(set(served)) == list(range(31 - replayed))


def test_a_loop_that_leaves_early_keeps_the_blocks_it_finished(clock):
    from loadeval_nb.core.explore.straggler import run_pass

    def run_once(batches):
        for i, _ in enumerate(batches):
            clock.advance(MS)
            if i == 10:  # in the second block
                break

    blocks = run_pass(
        list(range(100)), run_once, _plan(), replay_in="free", num_cached_batches=2, clock=clock
    )
    assert [b.arm for b in blocks] == ["real"]


def test_the_pass_is_one_loop():
    from loadeval_nb.core.explore.straggler import run_pass

    def twice(batches):
        list(batches)
        list(batches)

    with pytest.raises(LoadEvalError, match="iterated twice"):
        run_pass(list(range(100)), twice, _plan(), replay_in=None, num_cached_batches=2)


def test_an_empty_loader_is_one_sentence():
    from loadeval_nb.core.explore.straggler import run_pass

    with pytest.raises(LoadEvalError, match="produced no batches"):
        run_pass([], list, _plan(), replay_in="free", num_cached_batches=2)


def test_prove_straggler_needs_a_process_group():
    from loadeval_nb.core.ranks.skew import ranks_result
    from loadeval_nb.ranks import prove_straggler

    with pytest.raises(LoadEvalError, match="needs torch.distributed"):
        prove_straggler([1, 2], list, ranks_result([rank(0, 1.0)]))
