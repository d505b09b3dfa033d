"""The real image pipeline of the ``jpeg`` check: JPEG files made on the machine with PIL
(varied sizes), read and decoded in DataLoader workers, augmented as ImageNet training
does (a RandomResizedCrop, a horizontal flip, colour jitter, normalisation), feeding a
ResNet-style network built here, in mixed precision on CUDA.

The augmentations are torchvision's (``transforms.v2``) where it is installed and the
same steps in plain torch where not; either way they are classes in a list
``.transforms`` (as torchvision's ``Compose`` keeps them), so that the ladder's split
times each where it runs, in the workers, and ``harness.hand_split`` times the same steps by
hand. Decoding is the list's first step (the file's bytes in, a uint8 image out)."""

from __future__ import annotations

import io
import math
import os
import random
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


# ---- the files -----------------------------------------------------------------------------


def _one_jpeg(args: tuple[str, int, int, int]) -> int:
    """One photo-like JPEG (smooth colour fields, edges and grain, so that its size and its
    decoding cost vary as a photo's do); its size in bytes."""
    from PIL import Image

    path, w, h, seed = args
    rng = np.random.default_rng(seed)
    low = rng.uniform(0, 255, (max(2, h // 32), max(2, w // 32), 3)).astype(np.uint8)
    img = Image.fromarray(low).resize((w, h), Image.BICUBIC)
    arr = np.asarray(img, dtype=np.int16) + rng.normal(0, 12, (h, w, 3)).astype(np.int16)
    Image.fromarray(arr.clip(0, 255).astype(np.uint8)).save(path, "JPEG", quality=90)
    return os.path.getsize(path)


def make_jpegs(folder: Path, n: int, sides: tuple[int, int], seed: int = 0) -> list[Path]:
    """``n`` JPEG files in ``folder``, each side drawn from ``sides`` (min, max), made in
    as many processes as there are cores."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    jobs = [
        (str(folder / f"img{i:05d}.jpg"), rng.randint(*sides), rng.randint(*sides), seed + i)
        for i in range(n)
    ]
    cores = max(1, min(len(os.sched_getaffinity(0)), 16))
    if cores == 1 or n < 64:
        for job in jobs:
            _one_jpeg(job)
    else:
        with ProcessPoolExecutor(cores) as pool:
            list(pool.map(_one_jpeg, jobs, chunksize=32))
    return [Path(j[0]) for j in jobs]


class JpegFiles(Dataset):
    """The files' bytes, read per item (the storage's share), through ``.transform``;
    ``length`` items cycling over the files (an epoch long enough for the pass's arms
    without making more files than the page cache holds)."""

    def __init__(
        self,
        paths: Sequence[Path],
        transform: Callable[[bytes], torch.Tensor],
        length: int = 0,
    ) -> None:
        self.paths, self.transform = list(paths), transform
        self.length = max(length, len(self.paths))

    def __len__(self) -> int:
        return self.length

    def raw(self, i: int) -> bytes:
        with open(self.paths[i % len(self.paths)], "rb") as f:
            return f.read()

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(self.raw(i))


# ---- the steps, in plain torch (torchvision's where it is installed) -----------------------


class Compose:
    def __init__(self, transforms: list[Callable[[Any], Any]]) -> None:
        self.transforms = transforms

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


class Decode:
    """JPEG bytes to a uint8 CHW tensor (PIL's libjpeg)."""

    def __call__(self, data: bytes) -> torch.Tensor:
        from PIL import Image

        img = Image.open(io.BytesIO(data)).convert("RGB")
        return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)


class RandomResizedCrop:
    """torchvision's: an area of 8-100 % at an aspect of 3/4-4/3, resized (bilinear,
    antialiased) to ``size``."""

    def __init__(self, size: int, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> None:
        self.size, self.scale, self.ratio = size, scale, ratio

    def _box(self, h: int, w: int) -> tuple[int, int, int, int]:
        area = h * w
        logs = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * random.uniform(*self.scale)
            aspect = math.exp(random.uniform(*logs))
            cw, ch = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
            if 0 < cw <= w and 0 < ch <= h:
                return random.randint(0, h - ch), random.randint(0, w - cw), ch, cw
        side = min(h, w)  # the centre crop torchvision falls back on
        return (h - side) // 2, (w - side) // 2, side, side

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        y, x, ch, cw = self._box(*img.shape[-2:])
        crop = img[None, :, y : y + ch, x : x + cw].float()
        out = F.interpolate(crop, (self.size, self.size), mode="bilinear", antialias=True)
        return out[0].round_().clamp_(0, 255).to(torch.uint8)


class RandomHorizontalFlip:
    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        return img.flip(-1) if random.random() < 0.5 else img


class ColorJitter:
    """Brightness, contrast and saturation, each by a factor in [1-s, 1+s], in random order."""

    def __init__(self, brightness=0.4, contrast=0.4, saturation=0.4) -> None:
        self.amounts = (brightness, contrast, saturation)

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        x = img.float()
        gray_w = torch.tensor([0.299, 0.587, 0.114]).view(3, 1, 1)
        for k in random.sample(range(3), 3):
            f = random.uniform(1 - self.amounts[k], 1 + self.amounts[k])
            if k == 0:
                x = x * f
            elif k == 1:
                x = (x - (x * gray_w).sum(0).mean()) * f + (x * gray_w).sum(0).mean()
            else:
                gray = (x * gray_w).sum(0, keepdim=True)
                x = (x - gray) * f + gray
            x = x.clamp(0, 255)
        return x.round_().to(torch.uint8)


class Normalize:
    """To float in [0, 1], then ImageNet's mean and standard deviation per channel."""

    def __init__(self) -> None:
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        return (img.float().div_(255) - self.mean) / self.std


def augment(size: int) -> tuple[Compose, str]:
    """The pipeline and whose steps it runs (``torchvision`` or ``plain torch``)."""
    try:
        from torchvision.transforms import v2
    except ImportError:
        steps: list[Callable[[Any], Any]] = [
            RandomResizedCrop(size),
            RandomHorizontalFlip(),
            ColorJitter(),
            Normalize(),
        ]
        return Compose([Decode(), *steps]), "plain torch"
    tv: list[Callable[[Any], Any]] = [
        v2.RandomResizedCrop(size, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ColorJitter(0.4, 0.4, 0.4),
        v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]),
    ]
    return Compose([Decode(), *tv]), f"torchvision {_version('torchvision')}"


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


# ---- the network -------------------------------------------------------------------------


class Block(nn.Module):
    """ResNet's basic block: two 3x3 convolutions and a shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.short(x))


class ResNet(nn.Module):
    """A ResNet-18-like network (``blocks`` per stage, widths doubling from ``width``)."""

    def __init__(self, width: int = 64, blocks: Sequence[int] = (2, 2, 2, 2), classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )  # fmt: skip
        layers, cin = [], width
        for i, n in enumerate(blocks):
            cout = width * 2**i
            for j in range(n):
                layers.append(Block(cin, cout, 2 if j == 0 and i > 0 else 1))
                cin = cout
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.stem(x)).mean(dim=(2, 3)))


class AmpTrainer:
    """Forward (bf16 autocast on CUDA), cross-entropy on fixed labels, backward, SGD step;
    channels-last on CUDA. Returns the loss without reading it (no host sync)."""

    def __init__(self, model: nn.Module, dev: torch.device, batch: int) -> None:
        self.cuda = dev.type == "cuda"
        fmt = torch.channels_last if self.cuda else torch.contiguous_format
        self.model = model.to(dev, memory_format=fmt)
        self.fmt, self.dev = fmt, dev
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        self.labels = torch.arange(batch, device=dev) % 1000

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dev, non_blocking=True).contiguous(memory_format=self.fmt)
        with torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=self.cuda):
            loss = F.cross_entropy(self.model(x), self.labels[: len(x)])
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss
