"""The built-in synthetic workload: image classification with CPU-heavy transforms.

``python -m loadeval_nb demo`` runs it as a real + replay pair, prints the
verdict and writes an HTML report. It runs on CPU, or on CUDA when present.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from .core.errors import LoadEvalError
from .core.explore import RunHooks, RunSettings, run_pair
from .core.verdict import Diagnosis

__all__ = ["SyntheticImages", "SmallConvNet", "train_steps", "run_demo"]

_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class SyntheticImages(Dataset):
    """Deterministic synthetic images with a decode-and-augment pipeline done on the CPU.

    Each item "decodes" a ``source_size`` RGB image (generated from its index),
    then applies a random resized crop, a flip, a small rotation, a Gaussian blur
    and a colour jitter (Pillow and NumPy), and normalises it to a
    ``3 x out_size x out_size`` float tensor: enough CPU per item to make a
    one-worker loader the bottleneck of a small CNN.
    """

    def __init__(
        self,
        n: int = 4096,
        source_size: int = 160,
        out_size: int = 64,
        num_classes: int = 10,
        seed: int = 0,
    ) -> None:
        try:
            from PIL import Image, ImageFilter  # noqa: F401
        except ImportError:  # pragma: no cover - the demo extra installs it
            raise LoadEvalError(
                "The demo needs Pillow; install it with pip install 'loadeval-nb[demo]'."
            ) from None
        self.n, self.source_size, self.out_size = n, source_size, out_size
        self.num_classes, self.seed = num_classes, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from PIL import Image, ImageFilter

        rng = np.random.default_rng(self.seed * 1_000_003 + i)
        label = int(i % self.num_classes)
        s = self.source_size
        # "decode": a smooth class-dependent pattern plus sensor noise
        yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
        base = np.sin((label + 1) * 3.0 * xx + rng.uniform(0, 6.28)) * np.cos(
            (label + 2) * 2.0 * yy
        )
        img = np.stack([base, np.roll(base, label, axis=0), base.T], axis=-1)
        img = (img * 90 + 128 + rng.normal(0, 20, size=img.shape)).clip(0, 255).astype(np.uint8)
        pil = Image.fromarray(img)
        # augment: random resized crop, flip, rotation, blur
        c = int(rng.integers(s // 2, s))
        x0, y0 = (int(v) for v in rng.integers(0, s - c + 1, size=2))
        pil = pil.crop((x0, y0, x0 + c, y0 + c)).resize(
            (self.out_size, self.out_size), Image.BILINEAR
        )
        if rng.random() < 0.5:
            pil = pil.transpose(Image.FLIP_LEFT_RIGHT)
        pil = pil.rotate(float(rng.uniform(-15, 15)), resample=Image.BILINEAR)
        pil = pil.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.5, 1.5))))
        arr = np.asarray(pil, dtype=np.float32) / 255.0
        arr = arr * rng.uniform(0.8, 1.2, size=(1, 1, 3)).astype(np.float32)  # colour jitter
        arr = (arr - _MEAN) / _STD
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))), label


class SmallConvNet(nn.Module):
    """A small CNN for 64x64 inputs."""

    def __init__(self, num_classes: int = 10, width: int = 32) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(3, w, 3, stride=2, padding=1),
            nn.BatchNorm2d(w),
            nn.ReLU(inplace=True),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
            nn.BatchNorm2d(2 * w),
            nn.ReLU(inplace=True),
            nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1),
            nn.BatchNorm2d(4 * w),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def train_steps(
    model: nn.Module, loader: Any, device: torch.device, opt: torch.optim.Optimizer
) -> None:
    """The user's training loop, unchanged: for x, y in loader -> forward, backward, step."""
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()


def run_demo(
    steps: int = 65,
    warmup: int = 5,
    batch_size: int = 32,
    num_workers: int = 1,
    num_cached_batches: int = 10,
    device: Optional[str] = None,
    out: Optional[str] = "loadeval-demo.html",
    log_dir: Optional[str] = None,
    echo: Callable[[str], None] = print,
) -> Diagnosis:
    """Run the synthetic workload as a real + ideal pair (:func:`run_pair`) and return the
    diagnosis. ``steps``, ``warmup`` and ``num_cached_batches`` mean what they mean in
    :class:`RunSettings` (``steps`` counts the warm-up)."""
    settings = RunSettings(
        steps=steps,
        warmup=warmup,
        num_cached_batches=num_cached_batches,
        log_dir=log_dir,
        worker_timing=False,
    )
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    threads = torch.get_num_threads()
    if dev.type == "cpu":
        # leave the loader workers their own cores, as one would when training on the CPU
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - num_workers))
    try:
        return _run_pair(settings, batch_size, num_workers, dev, out, echo)
    finally:
        torch.set_num_threads(threads)


class _Echo(RunHooks):
    """Says each run's length as it ends."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.t = time.perf_counter()

    def run_started(self, which: str, ev: Any, index: int, total: int) -> None:
        self.t = time.perf_counter()

    def run_ended(self, which: str, ev: Any, error: Optional[BaseException]) -> None:
        took = time.perf_counter() - self.t
        if which == "pair":
            runs, plan = ev.to_runs(), ev.plan
            self.echo(
                f"  real and ideal interleaved: {runs['real'].n_steps} real and "
                f"{runs['ideal'].n_steps} ideal steps ({plan.blocks} blocks of {plan.block} "
                f"each, replaying {len(ev.cached_batches)} cached batches) in {took:.1f} s"
            )
            return
        cached = f" (replaying {len(ev.cached_batches)} cached batches)" if which == "ideal" else ""
        self.echo(f"  {which} run: {ev.total_steps} steps in {took:.1f} s{cached}")


def _run_pair(
    settings: RunSettings,
    batch_size: int,
    num_workers: int,
    dev: torch.device,
    out: Optional[str],
    echo: Callable[[str], None],
) -> Diagnosis:
    torch.manual_seed(0)
    ds = SyntheticImages(n=batch_size * (settings.steps + 1))
    dl = DataLoader(
        ds,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        pin_memory=dev.type == "cuda",
    )
    model = SmallConvNet().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    echo(
        f"loadeval_nb demo: synthetic images, batch {batch_size}, num_workers={num_workers}, "
        f"{settings.steps} steps per run ({settings.warmup} of them warm-up) on {dev}"
    )
    result = run_pair(dl, lambda ev: train_steps(model, ev, dev, opt), settings, hooks=_Echo(echo))
    if result.error is not None:
        raise result.error
    assert result.diagnosis is not None and result.real is not None and result.ideal is not None
    echo("")
    echo(result.diagnosis.text("cli"))
    for which, path in result.log_paths.items():
        echo(f"{which} run log: {path}")
    if out:
        from .viz import save_report

        save_report(result.real, result.ideal, out, title="loadeval_nb demo")
        echo(f"\nReport written to {out}")
    return result.diagnosis
