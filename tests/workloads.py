"""Sleep-based workloads whose costs are known: the ground truth the timing tests check against.

Sleeping takes no core, so these costs hold on a 2-core machine with workers too.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset


class SleepyItems(Dataset):
    """``n`` items, each taking ``item_s`` seconds to make; item ``i`` is a tensor of three ``i``."""

    def __init__(self, n: int, item_s: float) -> None:
        self.n, self.item_s = n, item_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.item_s:
            time.sleep(self.item_s)
        return torch.full((3,), float(i))


def sleep_steps(step_s: float):
    """A ``run_once`` for run_pair / run_ladder / run_sweep: every step sleeps ``step_s``."""

    def run_once(ev) -> None:
        for _ in ev:
            time.sleep(step_s)

    return run_once
