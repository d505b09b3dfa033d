"""Workloads whose costs are known: the ground truth the timing tests check against.

Each sleeps for real by default (sleeping takes no core, so these costs hold on a
2-core machine with workers too), or, given a fake ``clock`` (the ``clock`` and
``fake_time`` fixtures), advances it instead and takes no time at all: exact numbers,
wherever the clock is read in the process that does the work.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset


def take(seconds: float, clock=None) -> None:
    """Spend ``seconds``: sleep, or advance the fake ``clock`` by as much."""
    if clock is not None:
        clock.advance(round(seconds * 1e9))
    elif seconds:
        time.sleep(seconds)


class SleepyItems(Dataset):
    """``n`` items, each taking ``item_s`` seconds to make; item ``i`` is a tensor of three ``i``."""

    def __init__(self, n: int, item_s: float, clock=None) -> None:
        self.n, self.item_s, self.clock = n, item_s, clock

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.item_s:
            take(self.item_s, self.clock)
        return torch.full((3,), float(i))


def sleep_steps(step_s: float, clock=None):
    """A ``run_once`` for run_pair / run_ladder / run_sweep: every step takes ``step_s``."""

    def run_once(ev) -> None:
        for _ in ev:
            take(step_s, clock)

    return run_once
