"""What the contended arm costs: a pair with and without it, side by side on the same
loader, A B B A, for workers that sleep (waiting) and workers that burn the CPU the step
needs (contention): the pass's wall time, its steps, and the speedup interval's width,
each as a ratio to the pair without the arm (the goal: at most 1.25 the time, the same
width).

    python -m bench.contention            # 2 pairs a side a workload, about a minute
    python -m bench.contention --cuda     # the step on the GPU: one pair, its split
    python -m bench.contention --stopwatch  # the real and ideal steps against a stopwatch

``--stopwatch`` checks that the pass with the arm (which runs every arm at a 0.1 ms
switch interval) reads the real and ideal steps the user's own loop takes at Python's
default interval: a stopwatch of the loop over the loader and over cached batches, with
no tool, then the pair with the arm and without it, A B C C B A, twice a workload; it
prints each pair's real and ideal mean steps as ratios to the stopwatch's.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb import RunSettings, run_pair


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Items(Dataset):
    def __init__(self, sleep_s: float = 0.0, burn_s: float = 0.004) -> None:
        self.sleep_s, self.burn_s = sleep_s, burn_s

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        _burn(self.burn_s)
        return torch.zeros(4)


def train(batches) -> None:
    for _ in batches:
        _burn(0.008)


WORKLOADS = {"sleep": (0.004, 0.0), "burn": (0.0, 0.004)}
"""Each item's (sleep, burn) seconds, 4 items a batch over 2 workers; the step burns 8 ms."""


def one(workload: str, contention: bool) -> tuple[float, int, float, str]:
    sleep_s, burn_s = WORKLOADS[workload]
    loader = DataLoader(Items(sleep_s, burn_s), batch_size=4, num_workers=2)
    settings = RunSettings(
        steps=200, warmup=10, num_cached_batches=8, contention=contention, sample_interval_s=None
    )
    t = time.perf_counter()
    result = run_pair(loader, train, settings)
    wall = time.perf_counter() - t
    d = result.diagnosis
    steps = sum(r.n_steps for r in (result.real, result.ideal, result.contended) if r is not None)
    lo, hi = d.speedup_ci
    split = (
        f"waiting {d.waiting_s * 1e3:.2f} ms, CPU taken {d.contention_s * 1e3:.2f} ms"
        if d.waiting_s is not None
        else ""
    )
    return wall, steps, (hi - lo) / d.speedup, split


def main(rounds: int = 2) -> None:
    for workload in WORKLOADS:
        out: dict[bool, list[tuple[float, int, float, str]]] = {False: [], True: []}
        for r in range(rounds):
            for arm in (False, True) if r % 2 == 0 else (True, False):
                out[arm].append(one(workload, arm))
        for arm, rows in out.items():
            for wall, steps, width, split in rows:
                print(
                    f"{workload:5}  contention={arm!s:5}  pass {wall:5.2f} s, {steps} steps  "
                    f"CI width {width:6.2%}  {split}"
                )
        med = {a: [statistics.median(row[k] for row in out[a]) for k in range(3)] for a in out}
        print(
            f"{workload:5}  with the arm / without: pass time {med[True][0] / med[False][0]:.2f}, "
            f"steps {med[True][1] / med[False][1]:.2f}, speedup CI width "
            f"{med[True][2] / med[False][2]:.2f}"
        )


def cuda_split() -> None:
    """The split on CUDA: a small convnet's step on the GPU (read back each step), fed by
    two workers that burn the CPU making each batch."""
    dev = torch.device("cuda")
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3)
    ).to(dev)

    class Images(Items):
        def __getitem__(self, i: int) -> torch.Tensor:
            _burn(0.004)
            return torch.rand(3, 128, 128)

    def gpu_train(batches) -> None:
        for b in batches:
            net(b.to(dev, non_blocking=True)).sum().item()

    loader = DataLoader(Images(), batch_size=16, num_workers=4, pin_memory=True)
    settings = RunSettings(steps=300, warmup=20, num_cached_batches=8, contention=True)
    d = run_pair(loader, gpu_train, settings).diagnosis
    print(d.text())


def stopwatch(loader: DataLoader, steps: int = 200, warmup: int = 10) -> tuple[float, float]:
    """The user's loop with no tool, at the interpreter's own switch interval: the mean
    step over the loader (from one step's end to the next's, the wait included) and over
    8 of its batches served again."""
    it = iter(loader)
    cached = [next(it) for _ in range(8)]
    for _ in range(warmup):
        _burn(0.008) if next(it) is not None else None
    t = time.perf_counter()
    for _ in range(steps):
        next(it)
        _burn(0.008)
    real = (time.perf_counter() - t) / steps
    del it
    t = time.perf_counter()
    for k in range(steps):
        _ = cached[k % 8]
        _burn(0.008)
    return real, (time.perf_counter() - t) / steps


def against_stopwatch(rounds: int = 2) -> None:
    for workload, (sleep_s, burn_s) in WORKLOADS.items():
        rows: dict[str, list[tuple[float, float]]] = {"stopwatch": [], "arm": [], "no arm": []}
        for _ in range(rounds):
            for how in ("stopwatch", "arm", "no arm", "no arm", "arm", "stopwatch"):
                loader = DataLoader(Items(sleep_s, burn_s), batch_size=4, num_workers=2)
                if how == "stopwatch":
                    rows[how].append(stopwatch(loader))
                    continue
                settings = RunSettings(
                    steps=200, warmup=10, num_cached_batches=8, contention=how == "arm"
                )
                d = run_pair(loader, train, settings).diagnosis
                rows[how].append((d.real_step_s, d.ideal_step_s))
        truth = [statistics.mean(r[k] for r in rows["stopwatch"]) for k in (0, 1)]
        print(
            f"{workload:5}  stopwatch: real {truth[0] * 1e3:.2f} ms, ideal {truth[1] * 1e3:.2f} ms"
            f" (default switch interval {sys.getswitchinterval() * 1e3:g} ms)"
        )
        for how in ("arm", "no arm"):
            got = [statistics.mean(r[k] for r in rows[how]) for k in (0, 1)]
            print(
                f"{workload:5}  {how:6}  real {got[0] * 1e3:.2f} ms ({got[0] / truth[0]:.3f}x "
                f"the stopwatch's), ideal {got[1] * 1e3:.2f} ms ({got[1] / truth[1]:.3f}x)  "
                f"each: {', '.join(f'{r[0] * 1e3:.2f}/{r[1] * 1e3:.2f}' for r in rows[how])}"
            )


if __name__ == "__main__":
    if "--cuda" in sys.argv:
        cuda_split()
    elif "--stopwatch" in sys.argv:
        against_stopwatch()
    else:
        main()
