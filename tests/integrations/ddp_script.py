"""A DDP training script for torchrun: every rank measures its pair, rank 0 prints the report.

    torchrun --standalone --nproc-per-node 2 ddp_script.py OUT_DIR

Environment: SLOW_RANK makes that rank's loader slow (4 ms an item, in the main process);
FAIL_RANK makes that rank's training loop raise in its real run; WORKERS=1,2 gives each
rank its own ``num_workers`` (loaders that differ between ranks).
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from loadeval_nb import RunSettings, run_pair
from loadeval_nb.ranks import gather_pair

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.workloads import SleepyItems  # noqa: E402  (run as a script by torchrun)


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = rank == int(os.environ.get("SLOW_RANK", "-1"))
    fail = rank == int(os.environ.get("FAIL_RANK", "-1"))
    ds = SleepyItems(2000, 0.004 if slow else 0.0)
    workers = [int(w) for w in os.environ.get("WORKERS", "0").split(",")]
    loader = DataLoader(
        ds, batch_size=8, sampler=DistributedSampler(ds), num_workers=workers[rank % len(workers)]
    )
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(batches) -> None:
        for i, x in enumerate(batches):
            if fail and i == 5 and batches.mode in ("log", "pair"):
                raise RuntimeError(f"rank {rank} failed on purpose")
            time.sleep(0.010)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()  # the all-reduce: every rank waits for the slowest here
            opt.step()

    settings = RunSettings(
        steps=50, warmup=5, num_cached_batches=4, log_dir=out_dir, sample_interval_s=None
    )
    result = run_pair(loader, train, settings)
    report = gather_pair(result)
    if rank == 0:
        print(report)
        summary = {
            "world_size": report.world_size,
            "straggler": report.straggler,
            "slowest": report.slowest,
            "skew_s": report.skew_s,
            "skew_ci": list(report.skew_ci),
            "hosts": [r.host for r in report.ranks],
            "verdicts": {str(k): d.verdict for k, d in report.diagnoses.items()},
            "real_step_s": {str(k): d.real_step_s for k, d in report.diagnoses.items()},
            "real_wait_s": {str(k): d.real_wait_s for k, d in report.diagnoses.items()},
        }
        with open(os.path.join(out_dir, "report.json"), "w") as f:
            json.dump(summary, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
