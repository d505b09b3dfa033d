"""Gathered ranks: straggler and skew from runs whose waits are known (no processes)."""

from __future__ import annotations

import random

import pytest

from loadeval_nb import LoadEvalError, Run
from loadeval_nb.core import RankResult, gather_pair
from loadeval_nb.core._shared import ranks_result
from loadeval_nb.core.ranks import _payload

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
    text = rep.text()
    assert text.startswith("4 ranks: rank 1 is a straggler") and "node1" in text
    assert "1 (straggler)" in text


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
