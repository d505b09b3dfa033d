"""launch_ranks: forked CPU ranks of a gloo group, as a notebook would start them."""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from loadeval_nb import LoadEvalError, RunSettings, run_pair
from loadeval_nb.integrations import launch_ranks
from loadeval_nb.ranks import gather_pair

from ..timing import retry_once
from ..workloads import SleepyItems

pytestmark = pytest.mark.slow


def _pair_on_each_rank():
    rank = dist.get_rank()
    ds = SleepyItems(800, 0.003 if rank == 1 else 0.0)  # rank 1: 24 ms a batch
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(batches):
        for x in batches:
            time.sleep(0.005)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    result = run_pair(
        loader, train, RunSettings(steps=30, warmup=3, num_cached_batches=3, sample_interval_s=None)
    )
    return gather_pair(result)


@retry_once  # sleeping loaders in two ranks: a busy machine excuses a failure
def test_rank_0_hands_back_the_gathered_report():
    report = launch_ranks(_pair_on_each_rank, 2)
    assert report.world_size == 2 and report.straggler == 1
    assert 0.018 <= report.skew_s <= 0.035, report


def _fails_on_rank_1():
    if dist.get_rank() == 1:
        raise ValueError("rank 1 gave up")
    dist.barrier()


def test_a_failing_rank_fails_the_launch_with_its_traceback():
    with pytest.raises(RuntimeError, match=r"rank 1 failed first(.|\n)*rank 1 gave up"):
        launch_ranks(_fails_on_rank_1, 2)


def test_bad_process_counts_are_refused():
    with pytest.raises(LoadEvalError, match="nprocs must be"):
        launch_ranks(lambda: None, 0)
