"""launch_ranks: forked CPU ranks of a gloo group, as a notebook would start them."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from loadeval_nb import LoaderEvaluator, LoadEvalError, RunSettings, load_run, run_pair
from loadeval_nb.integrations import launch_ranks
from loadeval_nb.ranks import gather_pair

from ..timing import retry_once
from ..workloads import SleepyItems, take

pytestmark = pytest.mark.slow


def _pair_on_each_rank():
    rank = dist.get_rank()
    ds = SleepyItems(800, 0.003 if rank == 1 else 0.0)  # rank 1: 24 ms a batch
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(batches):
        for x in batches:
            take(0.005)
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


def _rank_1_hangs(folder):
    rank = dist.get_rank()
    path = os.path.join(folder, f"rank{rank}.json")
    with LoaderEvaluator(list(range(50)), metrics_file=path, sample_interval_s=None) as ev:
        for i, _ in enumerate(ev):
            if rank == 1 and i == 10:
                time.sleep(600)  # hangs mid-epoch
    return rank


def test_a_hung_rank_is_stopped_named_and_the_logs_are_kept(tmp_path):
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        launch_ranks(lambda: _rank_1_hangs(str(tmp_path)), 2, timeout_s=8)
    assert time.monotonic() - started < 60
    assert str(info.value) == (
        "rank 1 did not finish in 8 s and was stopped (rank 0 finished, and its logs are "
        "kept); raise timeout_s, or pass None to wait as long as they take."
    )
    assert load_run(str(tmp_path / "rank0.json")).status == "complete"
    hung = load_run(str(tmp_path / "rank1.json"))  # stopped as Stop does: its 11 steps
    assert hung.status == "stopped" and hung.n_steps == 11
    assert sorted(os.listdir(tmp_path)) == ["rank0.json", "rank1.json"]  # no journal
