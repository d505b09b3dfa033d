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


class FakeGPU:
    """An asynchronous GPU on the fake clock: each step the host spends ``host_ns``
    queueing work that the GPU runs in order, ``gpu_ns`` a step; with ``depth`` steps queued
    the host waits for the oldest (CUDA's launch queue); ``synchronize`` waits for all; an
    event runs when the GPU reaches it."""

    def __init__(self, clock, host_ns: int, gpu_ns: int, depth: int) -> None:
        self.clock, self.host_ns, self.gpu_ns, self.depth = clock, host_ns, gpu_ns, depth
        self.queued: list[int] = []  # finish times, in order
        self.syncs = 0

    def _wait(self, until: int) -> None:
        if until > self.clock():
            self.clock.advance(until - self.clock())

    def step(self) -> None:
        self.queued = [t for t in self.queued if t > self.clock()]
        while len(self.queued) >= self.depth:
            self._wait(self.queued.pop(0))
        self.clock.advance(self.host_ns)
        start = max(self.queued[-1] if self.queued else 0, self.clock())
        self.queued.append(start + self.gpu_ns)

    def synchronize(self) -> None:
        self.syncs += 1
        if self.queued:
            self._wait(self.queued[-1])
        self.queued = []

    def event(self):
        gpu = self

        class Event:
            t = None

            def record(self) -> None:
                self.t = max([gpu.clock()] + gpu.queued[-1:])

            def query(self) -> bool:
                return self.t is not None and self.t <= gpu.clock()

            def elapsed_time(self, end) -> float:
                return (end.t - self.t) / 1e6

        return Event()
