"""The contended arm: the headroom split into waiting for data and the CPU loading takes
from the step, against workloads whose split is built in code, each checked against a
stopwatch taken before and after the tool's pair (A B A, the arms reversed the second
time): the loop over the loader, over cached batches while a thread draws the loader's
(as many as the steps served) and drops them, over cached batches alone.

* workers that sleep take no CPU: the split is all waiting and the advice a faster loader;
* a worker that burns 3 ms a batch on the one core the step burns 8 ms on, ahead of the
  step: no waiting, 3 ms a step of CPU taken, and the advice is about CPU;
* a worker that sleeps and burns, behind the step: both, within 10 points of the
  stopwatch's shares, and the advice names both;
* a loader without workers: no arm, and a note that says why.
Unit checks of the interval and of the advice use runs made in code."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb.core.explore import RunSettings, run_pair
from loadeval_nb.core.record import Run
from loadeval_nb.core.verdict import diagnose

from ...timing import Disturbed, retry_once, steady_mean_s


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Items(Dataset):
    """Batches that take ``sleep_s`` asleep and ``burn_s`` of CPU each to make."""

    def __init__(self, n: int, sleep_s: float, burn_s: float) -> None:
        self.n, self.sleep_s, self.burn_s = n, sleep_s, burn_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        _burn(self.burn_s)
        return torch.zeros(4)


@contextlib.contextmanager
def one_core():
    """This thread, and the workers and threads it starts, on one core: a step and a
    worker that burn CPU then share it, whatever the machine has (here: 2 cores)."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(old)})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)
        torch.set_num_threads(threads)


def _steps(step_s: float):
    def run_once(batches) -> None:
        for _ in batches:
            _burn(step_s)  # CPU: the step needs the core

    return run_once


def _hand(loader, step_s: float, order: tuple[str, ...], n: int = 60) -> dict[str, float]:
    """A stopwatch's mean step (seconds) of the loop over the loader (``real``), over cached
    batches while a thread draws one of the loader's batches for each step and drops it
    (``contended``), and over cached batches alone (``ideal``), in ``order``; no tool."""
    it = iter(loader)
    cache = [next(it) for _ in range(8)]
    out: dict[str, float] = {}
    for arm in order:
        tokens: queue.SimpleQueue = queue.SimpleQueue()

        def draw(src, tokens) -> None:
            while tokens.get() is not None:  # one batch asked for each step, as a real loop
                next(src)

        th = threading.Thread(target=draw, args=(it, tokens)) if arm == "contended" else None
        if th is not None:
            th.start()
        stamps = []
        for k in range(n):
            stamps.append(time.perf_counter())
            if arm == "real":
                next(it)
            else:
                _ = cache[k % len(cache)]
                if th is not None:
                    tokens.put(1)
            _burn(step_s)
        stamps.append(time.perf_counter())
        if th is not None:
            tokens.put(None)
            th.join()
        out[arm] = steady_mean_s(stamps, 12)
    del it
    return out


def _split(sleep_s: float, burn_s: float, step_s: float, workers: int, pin: bool = True):
    """The tool's pair with its contended arm (on by default: the loader has workers),
    between two stopwatch rounds (A B A, the arms reversed in the second), on one core
    (``pin``): the diagnosis and the stopwatch's means."""
    loader = DataLoader(Items(100_000, sleep_s, burn_s), batch_size=None, num_workers=workers)
    settings = RunSettings(steps=200, warmup=10, num_cached_batches=8, sample_interval_s=None)
    with one_core() if pin else contextlib.nullcontext():
        before = _hand(loader, step_s, ("ideal", "contended", "real"))
        result = run_pair(loader, _steps(step_s), settings)
        after = _hand(loader, step_s, ("real", "contended", "ideal"))
    hand = {k: (before[k] + after[k]) / 2 for k in before}
    d = result.diagnosis
    assert result.contended is not None and d is not None and d.contended_step_s is not None
    if d.disturbed:
        raise Disturbed(f"the tool marked the {' and '.join(d.disturbed)} run disturbed")
    return d, hand


def _shares(d, hand) -> tuple[float, float]:
    """The share of the headroom that is CPU taken by loading: the tool's, the stopwatch's."""
    tool = d.contention_s / (d.waiting_s + d.contention_s)
    return tool, (hand["contended"] - hand["ideal"]) / (hand["real"] - hand["ideal"])


@pytest.mark.xfail(
    reason="issue 29: the contended arm's ground truths do not hold yet on this machine "
    "(the full suite at 448f708 failed all three; on an idle H200 the arm's previous "
    "version gave 10.3 % for (a) and 83 % against 58 % for (b)); the arm is off by default",
    strict=False,
)
@pytest.mark.slow
@retry_once
def test_sleeping_workers_make_the_headroom_all_waiting():
    """Built: workers that sleep 16 ms a batch (8 ms over two) take no CPU; the step burns
    4 ms: 4 ms a step of waiting, none of CPU taken."""
    d, hand = _split(sleep_s=0.016, burn_s=0.0, step_s=0.004, workers=2, pin=False)
    tool, by_hand = _shares(d, hand)
    assert d.real_step_s - d.ideal_step_s > 0.002, d.text()
    assert abs(tool) < 0.10 and abs(by_hand) < 0.10, (tool, by_hand, d.text())
    assert d.headroom_split == "waiting" and d.contention_bound is False
    assert "faster or more parallel loader" in d.text() and "headroom split" in d.text()


@pytest.mark.xfail(
    reason="issue 29: the contended arm's ground truths do not hold yet on this machine "
    "(the full suite at 448f708 failed all three; on an idle H200 the arm's previous "
    "version gave 10.3 % for (a) and 83 % against 58 % for (b)); the arm is off by default",
    strict=False,
)
@pytest.mark.slow
@retry_once
def test_burning_workers_take_the_cpu_the_step_needs():
    """Built: one core; the step burns 8 ms, a worker 3 ms a batch and keeps ahead of it:
    no waiting, 3 ms a step of CPU taken (the two share the core)."""
    d, hand = _split(sleep_s=0.0, burn_s=0.003, step_s=0.008, workers=1)
    tool, by_hand = _shares(d, hand)
    assert abs(d.contention_s - 0.003) < 0.10 * 0.003 + 0.0003, d.text()  # (+ the hand-over)
    assert tool > 0.90 and abs(tool - by_hand) < 0.10, (tool, by_hand, d.text())
    assert d.headroom_split == "contention" and d.contention_bound is True
    assert d.contention_ci[0] is not None and d.contention_ci[0] > 0
    assert "intra-op threads" in d.text() and "faster loader will not buy it back" in d.text()


@pytest.mark.xfail(
    reason="issue 29: the contended arm's ground truths do not hold yet on this machine "
    "(the full suite at 448f708 failed all three; on an idle H200 the arm's previous "
    "version gave 10.3 % for (a) and 83 % against 58 % for (b)); the arm is off by default",
    strict=False,
)
@pytest.mark.slow
@retry_once
def test_workers_that_sleep_and_burn_split_the_headroom_both_ways():
    """Built: one core; the step burns 6 ms, a worker sleeps 3 ms and burns 6 ms a batch:
    it cannot keep up (waiting) and takes the core from the step while it burns (CPU
    taken); the stopwatch says how much of each."""
    d, hand = _split(sleep_s=0.003, burn_s=0.006, step_s=0.006, workers=1)
    tool, by_hand = _shares(d, hand)
    assert abs(tool - by_hand) < 0.10, (tool, by_hand, hand, d.text())
    assert 1 / 3 <= tool <= 2 / 3, (tool, d.text())
    assert d.headroom_split == "both" and "The headroom is both" in d.text()


def test_a_loader_without_workers_gets_no_arm_and_a_note():
    loader = DataLoader(Items(400, 0.0, False), batch_size=4)
    settings = RunSettings(
        steps=120, warmup=4, num_cached_batches=4, contention=True, sample_interval_s=None
    )
    result = run_pair(loader, lambda b: [None for _ in b], settings)
    assert result.contended is None and result.diagnosis.contended_step_s is None
    assert any("num_workers=0" in n for n in result.diagnosis.notes)


def _run(mode: str, means_ms: list[float]) -> Run:
    """A run of blocks (epochs) of 10 steps at the given means, one warm-up step each."""
    step, epoch = [], []
    for e, m in enumerate(means_ms):
        step += [int(m * 1e6)] * 11
        epoch += [e] * 11
    start = [sum(step[:k]) for k in range(len(step))]
    return Run(mode=mode, start_ns=start, step_ns=step, block=epoch, warmup=1)


def test_the_split_pairs_blocks_and_the_advice_follows_it():
    real = _run("log", [20, 21, 20, 22])
    contended = _run("replay", [16, 17, 16, 17])
    ideal = _run("replay", [10, 10, 11, 10])
    d = diagnose(real, ideal, contended=contended)
    assert d.contention_s == pytest.approx((16.5 - 10.25) / 1e3)
    assert d.waiting_s == pytest.approx((20.75 - 16.5) / 1e3)
    lo, hi = d.contention_ci
    assert lo < d.contention_s < hi and lo > 0
    assert d.contention_bound is True and "intra-op threads" in d.text()
    waiting = diagnose(real, ideal, contended=_run("replay", [11, 11, 12, 11]))
    assert waiting.contention_bound is False
    assert "faster or more parallel loader" in waiting.text()
    assert "contention_ci" in d.to_dict() and isinstance(d.to_dict()["contention_ci"], list)
