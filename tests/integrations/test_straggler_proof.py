"""A straggler proven, not guessed: 2 CPU ranks over gloo under the real torchrun measure
their pair, gather it (the wait-skew test names a suspect) and put the suspect to
``prove_straggler``'s counterfactual (its loader free, every other rank's real).

This file is also the ranks' script (``bench/straggler_proof.py`` launches it too)::

    torchrun --standalone --nproc-per-node 2 tests/integrations/test_straggler_proof.py OUT

Environment: ``SLOW_RANK`` makes that rank's items take ``SLOW_ITEM_S`` more (default 4
ms: 32 ms a batch of 8, in the main process); ``ITEM_S`` is every rank's item time
(default 0). The step is 10 ms of sleep and a DDP all-reduce. Each rank times its own
items with a stopwatch: the gain the proof must find is the slow rank's loading a batch
minus the other's. Rank 0 writes ``report.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from loadeval_nb import RunSettings, run_pair
from loadeval_nb.ranks import gather_pair, prove_straggler
from tests.timing import retry_once  # (as a script: launch() puts the checkout on PYTHONPATH)

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
pytestmark = pytest.mark.slow


class TimedItems(Dataset):
    """``n`` items of three numbers, each taking ``item_s`` of sleep, timed by a stopwatch."""

    def __init__(self, n: int, item_s: float) -> None:
        self.n, self.item_s = n, item_s
        self.slept_s, self.items = 0.0, 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.item_s:
            t = time.perf_counter()
            time.sleep(self.item_s)
            self.slept_s += time.perf_counter() - t
        self.items += 1
        return torch.full((3,), float(i))


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    item_s = float(os.environ.get("ITEM_S", "0"))
    if rank == int(os.environ.get("SLOW_RANK", "-1")):
        item_s += float(os.environ.get("SLOW_ITEM_S", "0.004"))
    ds = TimedItems(4000, item_s)
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(batches: Any) -> None:
        for x in batches:
            time.sleep(0.010)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()  # the all-reduce: every rank waits for the slowest here
            opt.step()

    pair = RunSettings(steps=50, warmup=5, num_cached_batches=4, sample_interval_s=None)
    ranks = gather_pair(run_pair(loader, train, pair))
    ds.slept_s, ds.items = 0.0, 0
    t = time.perf_counter()
    proof = prove_straggler(
        loader, train, ranks, RunSettings(steps=100, warmup=5, num_cached_batches=4)
    )
    wall_s = time.perf_counter() - t
    loading = [None] * dist.get_world_size()  # each rank's stopwatch: sleeping a batch costs
    dist.all_gather_object(loading, ds.slept_s / ds.items * 8 if ds.items else 0.0)
    if rank == 0:
        print(ranks)
        print(proof)
        report = {
            "skew_straggler": ranks.straggler,
            "suspect": proof.suspect,
            "proven": proof.proven,
            "named_by_skew": proof.named_by_skew,
            "real_step_s": proof.real_step_s,
            "free_step_s": proof.free_step_s,
            "control_step_s": proof.control_step_s,
            "excess_s": proof.excess_s,
            "gain_s": proof.gain_s,
            "gain_ci": list(proof.gain_ci),
            "pairs": proof.pairs,
            "rank_step_s": {str(k): v for k, v in proof.rank_step_s.items()},
            "loading_s": loading,
            "proof_wall_s": wall_s,
            "text": proof.text(),
        }
        with open(os.path.join(out_dir, "report.json"), "w") as f:
            json.dump(report, f)
    dist.destroy_process_group()


def launch(out: Path, timeout_s: float = 240, **env: str) -> dict[str, Any]:
    """One torchrun launch of this script with ``env``: rank 0's report."""
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    full.pop("CUDA_VISIBLE_DEVICES", None)
    (out / "report.json").unlink(missing_ok=True)  # (a retry's launch writes its own)
    p = subprocess.run(
        [*TORCHRUN, __file__, str(out)], env=full, capture_output=True, text=True, timeout=timeout_s
    )
    # a rank that aborts at its exit in torch's own teardown ("terminate called without an
    # active exception": gloo's threads, after destroy_process_group) once rank 0 has
    # written its report ended after the measurement: the report is what is judged
    torn_down = "terminate called without an active exception" in p.stderr
    if not (torn_down and (out / "report.json").exists()):
        assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


@retry_once  # two ranks on a shared machine, sleeping loaders: a busy one excuses a failure
def test_a_slow_rank_is_proven_and_its_gain_is_the_constructed_one(tmp_path):
    r = launch(tmp_path, SLOW_RANK="1")
    assert r["suspect"] == 1 and r["proven"] is True, r
    truth = r["loading_s"][1] - r["loading_s"][0]  # ~32 ms: rank 1's items, stopwatched
    assert 0.030 <= truth <= 0.045, r
    assert abs(r["gain_s"] - truth) <= 0.10 * truth, r
    lo, hi = r["gain_ci"]
    assert 0 < lo <= r["gain_s"] <= hi, r
    # every rank's step falls, not only the suspect's: the others stop waiting for it
    for steps in r["rank_step_s"].values():
        assert steps["free"] < steps["real"] - 0.8 * truth, r
    assert "rank 1 is a straggler, proven: with rank 1's loader free" in r["text"], r


# equal ranks cleared: tests/integrations/test_launcher_proof.py, through the runner's
# proof (the same core pass), under the real torchrun


if __name__ == "__main__":
    main(sys.argv[1])
