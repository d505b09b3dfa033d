"""The GPU work the checks time: a chain of matmuls of a set length, a CNN trained step by
step (its batch size picked for a ~10 ms step), and the datasets that feed them (a few
tensors repeated, a loader that sleeps, a collate_fn that sleeps)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch import nn
from torch.utils.data import Dataset

from .harness import Ctx, gpu_seconds


class MatmulWork:
    """A GPU-bound step of about ``target_s``: chained square matmuls. Unless ``read()`` is
    called the host reads nothing back, so it runs ahead and the GPU never waits for it."""

    def __init__(self, ctx: Ctx, target_s: float) -> None:
        n = 4096 if ctx.cuda else 96
        gen = torch.Generator().manual_seed(0)
        self.w = (torch.randn(n, n, generator=gen) / math.sqrt(n)).to(ctx.dev)
        self.a = torch.randn(n, n, generator=gen).to(ctx.dev)
        self.k = 1
        one = gpu_seconds(ctx, self)
        self.k = max(1, round(target_s / one))
        self.step_s = gpu_seconds(ctx, self, reps=5)

    def __call__(self, _: Any = None) -> None:
        a = self.a
        for _ in range(self.k):
            a = torch.tanh(a @ self.w)
        self.a = a  # one dependency chain from step to step

    def read(self) -> float:
        """Read one value back: waits for the step, as logging a loss does."""
        return float(self.a[0, 0])


class ConvNet(nn.Module):
    """A CNN that is heavy for its input: a strided stem, then ``depth`` 3x3 convolutions at
    half resolution. uint8 images become floats on the device (4x fewer bytes to copy)."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 3, stride=2, padding=1), nn.ReLU()]
        for _ in range(depth):
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.uint8:
            x = x.float().div_(255)
        return self.head(self.body(x).mean(dim=(2, 3)))


class Trainer:
    """Forward, backward, SGD step. Returns the loss without reading it (no host sync)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        loss = self.model(x).square().mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


def calibrated_cnn(ctx: Ctx, res: int, target_s: float = 0.010) -> tuple[Trainer, int, float]:
    """The CNN and the batch size whose step is closest to ``target_s`` (about 5-20 ms on an
    H100: long enough that the copies of small inputs are a few per cent)."""
    width, depth = ctx.pick((128, 6), (128, 6), (8, 1))
    train = Trainer(ConvNet(width, depth).to(ctx.dev))
    best: Optional[tuple[float, int, float]] = None
    for b in ctx.pick((8, 16, 32, 64, 128, 256), (8, 16, 32, 64, 128, 256), (2,)):
        x = torch.randint(0, 256, (b, 3, res, res), dtype=torch.uint8, device=ctx.dev)
        s = gpu_seconds(ctx, lambda x=x: train(x), reps=8)
        score = abs(math.log(s / target_s))
        if best is None or score < best[0]:
            best = (score, b, s)
        if s > 2 * target_s:
            break
    assert best is not None
    return train, best[1], best[2]


class Repeat(Dataset):
    """``length`` items cycling over a few tensors: long epochs without the memory."""

    def __init__(self, items: Sequence[torch.Tensor], length: int) -> None:
        self.items, self.length = list(items), length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.items[i % len(self.items)]


class Sleepy(Dataset):
    """A loader that starves the loop: each item sleeps (slow storage, say)."""

    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        time.sleep(self.sleep_s)
        return i


class SleepyCollate:
    """Stacks, then sleeps: a known wait inside next()."""

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def __call__(self, items: list[torch.Tensor]) -> torch.Tensor:
        out = torch.stack(items)
        time.sleep(self.sleep_s)
        return out


def images(n: int, res: int, dtype: torch.dtype = torch.uint8) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (3, res, res), generator=gen).to(dtype) for _ in range(n)]
