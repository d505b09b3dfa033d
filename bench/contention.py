"""What the contended arm costs: a pair with and without it, side by side, on the same
loader (workers that burn the CPU the step needs), A B B A: the pass's wall time and
the speedup interval's width, each as a ratio to the pair without the arm.

    python -m bench.contention            # 2 pairs each, about a minute on 2 cores
    python -m bench.contention --cuda     # the step on the GPU: one pair, its split
"""

from __future__ import annotations

import statistics
import time

import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb import RunSettings, run_pair


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Items(Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> torch.Tensor:
        _burn(0.004)
        return torch.zeros(4)


def train(batches) -> None:
    for _ in batches:
        _burn(0.008)


def one(contention: bool) -> tuple[float, float, str]:
    loader = DataLoader(Items(), batch_size=4, num_workers=2)
    settings = RunSettings(
        steps=200, warmup=10, num_cached_batches=8, contention=contention, sample_interval_s=None
    )
    t = time.perf_counter()
    result = run_pair(loader, train, settings)
    wall = time.perf_counter() - t
    d = result.diagnosis
    lo, hi = d.speedup_ci
    split = (
        f"waiting {d.waiting_s * 1e3:.2f} ms, contention {d.contention_s * 1e3:.2f} ms"
        if d.waiting_s is not None
        else ""
    )
    return wall, (hi - lo) / d.speedup, split


def main(rounds: int = 2) -> None:
    out: dict[bool, list[tuple[float, float, str]]] = {False: [], True: []}
    for r in range(rounds):
        for arm in (False, True) if r % 2 == 0 else (True, False):
            out[arm].append(one(arm))
    for arm, rows in out.items():
        for wall, width, split in rows:
            print(f"contention={arm!s:5}  pass {wall:5.2f} s  CI width {width:6.2%}  {split}")
    w0 = statistics.median(w for w, _, _ in out[False])
    w1 = statistics.median(w for w, _, _ in out[True])
    c0 = statistics.median(c for _, c, _ in out[False])
    c1 = statistics.median(c for _, c, _ in out[True])
    print(f"pair time with the arm / without: {w1 / w0:.2f}; CI width ratio {c1 / c0:.2f}")


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


if __name__ == "__main__":
    import sys

    cuda_split() if "--cuda" in sys.argv else main()
