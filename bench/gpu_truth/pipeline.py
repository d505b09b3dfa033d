"""The seed study's image pipeline (crop, mask dilation, colour conversion, scale): classes
in a list ``.transforms``, as torchvision's Compose keeps them, so that the ladder's split
times each step where it runs (in the workers), and the same steps timed by hand."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from .workloads import images


class Compose:
    def __init__(self, transforms: list[Callable[[torch.Tensor], torch.Tensor]]) -> None:
        self.transforms = transforms

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for t in self.transforms:
            x = t(x)
        return x


class RandomCrop:
    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        c, (h, w) = self.size, img.shape[-2:]
        y, x = (int(v) for v in torch.randint(0, min(h, w) - c + 1, (2,)))
        return img[:, y : y + c, x : x + c].contiguous()


class MaskDilation:
    """Darken the surroundings of bright spots: a threshold mask grown by max_pool2d (k x k)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        x = img.float().div_(255)
        mask = (x[:1] > 0.9).float()[None]
        grown = F.max_pool2d(mask, self.k, stride=1, padding=self.k // 2)[0]
        return x * (1 - 0.5 * grown)


class ColourConvert:
    """RGB to YCbCr: a 3x3 matrix on every pixel."""

    M = torch.tensor([[0.299, 0.587, 0.114], [-0.169, -0.331, 0.5], [0.5, -0.419, -0.081]])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.einsum("ij,jhw->ihw", self.M, x)
        out[1:] += 0.5
        return out


class Scale:
    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        size = (self.size, self.size)
        return F.interpolate(x[None], size=size, mode="bilinear", antialias=True)[0]


class Photos(Dataset):
    """Random images (a pool of 8, made once and shared with forked workers) through a CPU
    pipeline in ``.transform``, where the ladder looks for it."""

    def __init__(self, n: int, size: int, transform: Compose) -> None:
        self.pool = images(8, size)
        self.n, self.transform = n, transform

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(self.pool[i % len(self.pool)])


def pipeline(crop: int, k: int, out: int) -> Compose:
    return Compose([RandomCrop(crop), MaskDilation(k), ColourConvert(), Scale(out)])
