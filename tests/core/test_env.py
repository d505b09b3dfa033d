"""The ranks' agreement (``core._env.agree``) and the one plan of an interleaved pass it
gives every rank, on a real store of torch's (an in-process ``HashStore`` standing in for
the job's ``TCPStore``; the other rank's answer is put there as it would be)."""

from __future__ import annotations

import json
import sys
import time

import pytest
import torch.distributed as dist
from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator, LoadEvalError
from loadeval_nb.core import _env
from loadeval_nb.core.measure.blocks import plan_blocks


@pytest.fixture
def two_ranks(monkeypatch):
    """This process is rank 0 of 2; the store is returned to put rank 1's answers in."""
    store = dist.HashStore()
    monkeypatch.setattr(_env, "dist_rank", lambda: (0, 2))
    monkeypatch.setattr(_env, "_agreements", {})
    c10d = sys.modules["torch.distributed"].distributed_c10d
    monkeypatch.setattr(c10d, "_get_default_store", lambda: store, raising=False)
    return store


def rank1_says(store, topic: str, value, n: int = 1) -> None:
    store.set(f"loadeval_nb/0/{topic}/{n}/1", json.dumps(value))


def test_one_process_agrees_with_nobody():
    assert _env.agree("anything", 1) is None


def test_every_rank_answer_in_rank_order(two_ranks):
    rank1_says(two_ranks, "topic", {"x": 2})
    assert _env.agree("topic", {"x": 1}) == [{"x": 1}, {"x": 2}]


def test_a_rank_that_never_arrives_is_named_within_the_time_limit(two_ranks):
    t = time.monotonic()
    with pytest.raises(LoadEvalError, match=r"^Rank 1 did not reach the topic within 0.3 s"):
        _env.agree("topic", 1, timeout_s=0.3)
    assert time.monotonic() - t < 5


def _loader(workers: int, n: int) -> DataLoader:
    return DataLoader(list(range(n)), batch_size=1, num_workers=workers)


def test_ranks_whose_queues_and_epochs_differ_get_one_plan(two_ranks):
    """Rank 0: 1 worker (a queue of 2), 100 batches; rank 1: 2 workers (4), 90 batches.
    Each planned alone they run a different number of steps (the DDP hang); agreed, the
    plan is the one for the deepest queue within the shortest epoch, on both."""
    alone0, alone1 = plan_blocks(200, 5, 5, 2, 100), plan_blocks(200, 5, 5, 4, 90)
    assert alone0 is not None and alone1 is not None
    assert alone0.total_steps != alone1.total_steps
    rank1_says(
        two_ranks,
        "plan of the interleaved pass",
        {"depth": 4, "len": 90, "steps": 200, "warmup": 5, "cache": 5, "blocks": None,
         "auto": False, "contention": False},
    )  # fmt: skip
    agreed = LoaderEvaluator(
        _loader(1, 100), mode="pair", steps=200, warmup=5, num_cached_batches=5
    )
    assert agreed.plan == alone1 and agreed.ranks == 2 and agreed.loader_len == 90
    assert agreed.depth == 2  # its own queue still decides what its drain leaves out
    assert len(agreed) <= 90


def test_a_rank_with_other_settings_is_one_sentence(two_ranks):
    rank1_says(
        two_ranks,
        "plan of the interleaved pass",
        {"depth": 0, "len": 100, "steps": 300, "warmup": 5, "cache": 5, "blocks": None,
         "auto": False, "contention": False},
    )  # fmt: skip
    with pytest.raises(LoadEvalError, match="Rank 1 measures with steps=300 where rank 0 has 200"):
        LoaderEvaluator(_loader(0, 100), mode="pair", steps=200, warmup=5, num_cached_batches=5)
