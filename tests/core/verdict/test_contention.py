"""The contended arm: the headroom split into waiting for data and the CPU loading takes
from the step, against workloads whose split is built in code.

* workers that sleep take no CPU: the split is all waiting (contention under 10 % of the
  headroom) and the advice is a faster loader;
* workers that burn the CPU the step needs: the contended step against a stopwatch of the
  same cached loop while a thread keeps drawing the same loader's batches, taken
  interleaved with the loop alone (A B B A): the tool's share of the headroom that is
  contention within 10 points of the stopwatch's;
* a loader without workers: no arm, and a note that says why.
Unit checks of the interval and of the advice use runs made in code."""

from __future__ import annotations

import statistics
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb.core.explore import RunSettings, run_pair
from loadeval_nb.core.record import Run
from loadeval_nb.core.verdict import diagnose

from ...timing import retry_once


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Items(Dataset):
    """Items that take ``item_s`` each: asleep, or burning a core (``burn``)."""

    def __init__(self, n: int, item_s: float, burn: bool) -> None:
        self.n, self.item_s, self.burn = n, item_s, burn

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        (_burn if self.burn else time.sleep)(self.item_s)
        return torch.zeros(4)


STEP_S = 0.008


def _train(batches) -> None:
    for _ in batches:
        _burn(STEP_S)  # CPU: the step needs a core


def _pair(burn: bool, workers: int = 2):
    loader = DataLoader(Items(20000, 0.004, burn), batch_size=4, num_workers=workers)
    settings = RunSettings(
        steps=200, warmup=10, num_cached_batches=8, contention=True, sample_interval_s=None
    )
    return loader, run_pair(loader, _train, settings)


@pytest.mark.slow
@retry_once
def test_sleeping_workers_make_the_headroom_all_waiting():
    _, result = _pair(burn=False)
    d = result.diagnosis
    assert result.contended is not None and d.contended_step_s is not None
    headroom = d.real_step_s - d.ideal_step_s
    assert headroom > 0.001  # 16 ms of sleep a batch over 2 workers: input-bound
    assert abs(d.contention_s) < 0.10 * headroom  # built: no CPU taken
    assert abs(d.waiting_s + d.contention_s - headroom) < 1e-9
    assert d.contention_bound is False and "faster or more parallel loader" in d.text()
    assert "headroom split" in d.text()


def _hand_contention(loader, rounds: int = 2) -> tuple[float, float]:
    """Mean step of the cached loop alone and while a thread draws the loader's batches,
    A B B A (stopwatches, no tool)."""
    it = iter(loader)
    cache = [next(it) for _ in range(8)]
    alone: list[float] = []
    drawn: list[float] = []

    def loop(out: list[float], n: int = 60) -> None:
        times = []
        for k in range(n):
            t = time.perf_counter()
            _burn(STEP_S)
            _ = cache[k % len(cache)]
            times.append(time.perf_counter() - t)
        out.append(statistics.mean(times[8:]))

    stop = threading.Event()

    def draw() -> None:
        while not stop.is_set():
            next(it)

    for r in range(rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            if side == "A":
                loop(alone)
            else:
                stop.clear()
                th = threading.Thread(target=draw)
                th.start()
                time.sleep(0.05)
                loop(drawn)
                stop.set()
                th.join()
    return statistics.mean(alone), statistics.mean(drawn)


@pytest.mark.slow
@retry_once
def test_burning_workers_take_cpu_from_the_step_as_a_stopwatch_says():
    loader, result = _pair(burn=True)
    d = result.diagnosis
    alone, drawn = _hand_contention(loader)
    headroom = d.real_step_s - d.ideal_step_s
    assert headroom > 0.001
    tool_share = d.contention_s / headroom
    hand_share = (drawn - alone) / headroom
    assert abs(tool_share - hand_share) < 0.10, (tool_share, hand_share, d.text())
    assert d.contention_ci[0] is not None and d.contention_ci[0] <= d.contention_s


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
    return Run(mode=mode, start_ns=start, step_ns=step, epoch=epoch, warmup=1)


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
