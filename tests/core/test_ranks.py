"""Gathered ranks: straggler and skew from runs whose waits are known (no processes)."""

from __future__ import annotations

import random

import pytest

from loadeval_nb import LoadEvalError, Run
from loadeval_nb.core import RankResult, gather_pair, rank_report
from loadeval_nb.core._ranks import _payload

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
    rep = rank_report([rank(1, 32.0), rank(0, 0.2), rank(2, 0.3), rank(3, 0.1)])
    assert [r.rank for r in rep.ranks] == [0, 1, 2, 3]
    assert rep.straggler == 1 and rep.slowest == 1
    assert rep.skew_s == pytest.approx(0.032 - 0.0002, abs=0.001)
    lo, hi = rep.skew_ci
    assert lo < rep.skew_s < hi and lo > 0.030
    text = rep.report()
    assert text.startswith("4 ranks: rank 1 is a straggler") and "node1" in text
    assert "1 (straggler)" in text


def test_equal_waits_name_no_straggler():
    rep = rank_report([rank(0, 5.0), rank(1, 5.1)])
    assert rep.straggler is None and "no rank holds the others back" in rep.report()


def test_a_failed_rank_is_reported():
    rep = rank_report([rank(0, 1.0), RankResult(1, "node0", None, None, error="boom")])
    assert rep.straggler is None and "rank 1 failed" in rep.report()


def test_gather_needs_torch_distributed():
    class Result:
        error = None

    with pytest.raises(LoadEvalError, match="init_process_group"):
        gather_pair(Result())
