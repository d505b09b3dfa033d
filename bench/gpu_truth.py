#!/usr/bin/env python
"""GPU truth (issue 22): loadeval_nb's GPU figures against truths taken without it.

    python bench/gpu_truth.py               # every check: about 5-10 min on one H100
    python bench/gpu_truth.py --quick       # shorter runs (wider noise)
    python bench/gpu_truth.py --only split  # one check
    python bench/gpu_truth.py --dry-run     # CPU, tiny sizes: runs the code, proves nothing
                                            # (also GPU_TRUTH_DRY_RUN=1)

Each figure is printed as "measured vs truth (ratio)" with PASS or FAIL, and the last line
says how many hold. Every truth is taken beside the tool, never through it:

  util      the NVML utilisation the tool samples (10 Hz) vs nvidia-smi -lms 100 running
            alongside, on a busy loop and on a loop starved by a sleeping loader: +-5 points.
  ideal     a ~10 ms CNN step replayed from a device cache keeps NVML >= 95 %; a pinned host
            cache copied with non_blocking=True is within 5 % of it; with unpinned float32
            batches the ladder's host rung minus its device rung matches the same two loops
            timed by hand (+-25 %), and the stage counts when the hand-timed share says so.
  split     large pageable copies (uint8 images sent as float32): the tool's copy time per
            step vs CUDA events around the same copies (+-10 %); its wait and step vs a
            stopwatch; wait + copy + compute add up to the step (+-10 %).
  observer  log mode on a ~5 ms CUDA step that reads its result back (so the host cannot
            hide a cost by running ahead): step time within 0.1 % of the bare loop
            (interleaved ABBA blocks, ratio of medians); no synchronise per step
            (torch.cuda.synchronize counted; torch.profiler's CUDA runtime calls).
  seed      a costly CPU pipeline (1024x1024 images: crop, mask dilation, colour conversion,
            scale; 4 workers): the pair's verdict and speedup vs hand-timed real and
            device-cached loops (+-15 %), the ladder's stage and costliest transform vs hand
            timings; after the fix (256x256 images, a small dilation) the verdict turns.
  suite     pytest -m gpu tests/gpu, the demo on CUDA, and %%loadeval --ladder in a real
            kernel (nbclient) on CUDA.

Without CUDA (and without --dry-run) it prints one line and exits 0. Exit status otherwise:
1 when a check fails (a dry run: when a check raised), else 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NO_CUDA_LINE = (
    "gpu_truth: no CUDA device here; nothing to measure (run this on a machine with an NVIDIA GPU)"
)
DRY_ENV = "GPU_TRUTH_DRY_RUN"


def nothing_to_measure(argv: Sequence[str]) -> bool:
    """No CUDA, and no dry run (or help) asked for."""
    asked = {"--dry-run", "-h", "--help"} & set(argv)
    return not asked and os.environ.get(DRY_ENV, "") in ("", "0") and not torch.cuda.is_available()


# Without CUDA the command says so in one line and exits 0, before loadeval_nb is imported:
# that line must come out alone, whatever the package prints or warns on import.
if __name__ == "__main__" and nothing_to_measure(sys.argv[1:]):
    print(NO_CUDA_LINE)
    sys.exit(0)

from loadeval_nb import (  # noqa: E402
    LoaderEvaluator,
    RunSettings,
    __version__,
    diagnose,
    run_ladder,
    run_pair,
)
from loadeval_nb.verdict import INPUT_BOUND, NOT_INPUT_BOUND, PARTLY_INPUT_BOUND  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
now = time.perf_counter_ns  # the tool's default clock: its stamps and ours share one origin


# ---- records: one figure against its truth ------------------------------------------------


@dataclass
class Record:
    """One figure against its truth. ``ok`` is None where the figure cannot exist here (a dry
    run on CPU has no NVML and no CUDA events): shown as SKIP and not counted."""

    check: str
    what: str
    measured: Any  # a number in ``unit``, or a text (a verdict, a name)
    truth: Any
    ok: Optional[bool]
    rule: str
    unit: str = ""
    note: str = ""

    def ratio(self) -> Optional[float]:
        m, t = self.measured, self.truth
        if _number(m) and _number(t) and t != 0:
            return m / t
        return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fmt_value(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if _number(v):
        if unit == "ms":  # four significant figures: 0.1 % of a 5 ms step must show
            return f"{v:.4g} ms"
        if unit == "%":
            return f"{v:.1f} %"
        if unit == "x":
            return f"{v:.3f}x"
        return f"{v:g} {unit}".rstrip()
    return str(v)


def format_record(r: Record) -> str:
    status = "SKIP" if r.ok is None else "PASS" if r.ok else "FAIL"
    ratio = r.ratio()
    shown = f"(ratio {ratio:.4f})" if ratio is not None else "(ratio -)"
    line = (
        f"  {status}  {r.check}: {r.what}: {fmt_value(r.measured, r.unit)} vs "
        f"{fmt_value(r.truth, r.unit)} {shown}  [{r.rule}]"
    )
    return line + (f"\n          {r.note}" if r.note else "")


def summary_line(records: Sequence[Record], dry: bool) -> str:
    counted = [r for r in records if r.ok is not None]
    held = sum(1 for r in counted if r.ok)
    if not dry:
        return f"gpu_truth: {held} of {len(counted)} checks hold"
    skipped = len(records) - len(counted)
    return (
        f"gpu_truth (dry run on CPU: code paths only, the figures mean nothing): {held} of "
        f"{len(counted)} checks hold; {skipped} need CUDA"
    )


def rel(check: str, what: str, m: Any, t: Any, tol: float, unit: str = "", note: str = ""):
    """The measured figure within +-tol (a fraction) of the truth."""
    ok = _number(m) and _number(t) and t != 0 and abs(m / t - 1) <= tol
    return Record(check, what, m, t, ok, f"within {tol:.0%}", unit, note)


def near(check: str, what: str, m: Any, t: Any, points: float, note: str = "") -> Record:
    """Two percentages within +-points of each other."""
    ok = _number(m) and _number(t) and abs(m - t) <= points
    return Record(check, what, m, t, ok, f"within {points:g} points", "%", note)


def at_least(check: str, what: str, m: Any, floor: float, unit: str = "", note: str = ""):
    ok = _number(m) and m >= floor
    return Record(check, what, m, floor, ok, f">= {fmt_value(floor, unit)}", unit, note)


def at_most(check: str, what: str, m: Any, ceiling: float, unit: str = "", note: str = ""):
    ok = _number(m) and m <= ceiling
    return Record(check, what, m, ceiling, ok, f"<= {fmt_value(ceiling, unit)}", unit, note)


def same(check: str, what: str, m: Any, t: Any, ok: bool, rule: str, note: str = "") -> Record:
    return Record(check, what, m, t, bool(ok), rule, "", note)


# ---- pure maths (no torch, no GPU: checked by the dry run's "maths" check) ----------------


def ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * 1e3


def mean(xs: Iterable[float]) -> Optional[float]:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def steady(values: Sequence[float], warmup: int) -> list[float]:
    """Drop the first max(warmup, 1) values: the tool never counts an epoch's first step."""
    return list(values[max(warmup, 1) :])


def abba(pairs: int) -> list[str]:
    """A, B, B, A, A, B, ...: drift (clocks, heat, other load) lands on both sides alike."""
    return [x for i in range(pairs) for x in (("A", "B") if i % 2 == 0 else ("B", "A"))]


def ratio_of_medians(b: Sequence[float], a: Sequence[float]) -> Optional[float]:
    if not a or not b:
        return None
    return statistics.median(b) / statistics.median(a)


def window_mean(
    times: Sequence[float], values: Sequence[Optional[float]], windows: Sequence[tuple]
) -> tuple[Optional[float], int]:
    """Mean of the readings stamped inside any of the (lo, hi) windows, and their count."""
    picked = [
        v
        for t, v in zip(times, values)
        if v is not None and any(lo <= t <= hi for lo, hi in windows)
    ]
    return mean(picked), len(picked)


def steady_windows(
    start_ns: Sequence[int],
    step_ns: Sequence[int],
    epoch: Sequence[int],
    steady_idx: Iterable[int],
    origin_ns: int,
    settle_ns: int,
) -> list[tuple[int, int]]:
    """Per epoch, the clock span of its steady steps, less ``settle_ns`` at the start (NVML
    averages over its own period, up to a second: early readings still hold the idle time
    before the epoch)."""
    spans: dict[int, list[int]] = {}
    for i in steady_idx:
        lo, hi = spans.setdefault(epoch[i], [start_ns[i], start_ns[i] + step_ns[i]])
        spans[epoch[i]] = [min(lo, start_ns[i]), max(hi, start_ns[i] + step_ns[i])]
    return [
        (origin_ns + lo + settle_ns, origin_ns + hi)
        for lo, hi in spans.values()
        if hi - lo > settle_ns
    ]


def parse_smi_line(line: str) -> Optional[tuple[float, float]]:
    """``2025/01/15 10:23:45.123, 97`` -> (Unix seconds, 97.0); None for anything else
    ("[N/A]", an error message)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 2:
        return None
    try:
        stamp = dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        return stamp, float(parts[1])
    except ValueError:
        return None


def smi_times_on_our_clock(
    stamps_unix: Sequence[float], arrivals_ns: Sequence[int], unix_minus_clock_ns: int
) -> list[float]:
    """nvidia-smi's own time stamps moved onto perf_counter_ns. Its stamps are used rather
    than when a line arrived (a pipe may hold lines back); if they disagree with the arrivals
    by over a minute (a clock or time-zone mismatch), they are shifted by the median gap."""
    times = [s * 1e9 - unix_minus_clock_ns for s in stamps_unix]
    if not times:
        return []
    gap = statistics.median(a - t for a, t in zip(arrivals_ns, times))
    return [t + gap for t in times] if abs(gap) > 60e9 else times


def expected_verdict(speedup: Optional[float]) -> Optional[str]:
    """The verdict a hand-timed speedup calls for (docs/verdict.md: headroom 20 % and 5 %)."""
    if speedup is None:
        return None
    if speedup >= 1.25:
        return INPUT_BOUND
    return PARTLY_INPUT_BOUND if speedup >= 1 / (1 - 0.05) else NOT_INPUT_BOUND


def verdict_agrees(verdict: Optional[str], hand_speedup: Optional[float]) -> bool:
    """The tool's verdict is the one the hand speedup calls for; within 5 % of a threshold
    (1.25x, 1.053x) either neighbour is accepted, since noise decides there."""
    if verdict is None or hand_speedup is None:
        return False
    ok = {expected_verdict(hand_speedup * f) for f in (0.95, 1.0, 1.05)}
    return verdict in ok


def pytest_counts(output: str) -> dict[str, int]:
    """``3 passed, 1 skipped in 2.0s`` -> {"passed": 3, "skipped": 1}."""
    tail = "\n".join(output.strip().splitlines()[-3:])
    counts: dict[str, int] = {}
    for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail):
        counts[kind.rstrip("s") if kind.startswith("error") else kind] = int(n)
    return counts


# ---- where the checks run ------------------------------------------------------------------


@dataclass
class Ctx:
    dev: torch.device
    dry: bool
    quick: bool
    tmp: Path

    @property
    def cuda(self) -> bool:
        return self.dev.type == "cuda"

    def pick(self, full: Any, quick: Any, dry: Any) -> Any:
        return dry if self.dry else quick if self.quick else full

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def cache_on(self) -> str:
        return "device" if self.cuda else "host"  # no device cache without CUDA

    def gpu_only(self, rec: Record, why: str) -> Record:
        """On CPU the figure does not exist (the tool reads NVML and CUDA events): SKIP."""
        if self.cuda:
            return rec
        return replace(
            rec, ok=None, note="; ".join(x for x in (f"needs CUDA: {why}", rec.note) if x)
        )


class Spans:
    """Durations of GPU work between marks on the current stream: CUDA events, read only
    after one synchronise at the end (reading one per step would add a wait per step). On
    CPU (a dry run) a stopwatch stands in."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.pairs: list[tuple[Any, Any]] = []
        self._open: Any = None

    def _mark(self) -> Any:
        if not self.cuda:
            return now()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def begin(self) -> None:
        self._open = self._mark()

    def end(self) -> None:
        self.pairs.append((self._open, self._mark()))

    def seconds(self) -> list[float]:
        if not self.cuda:
            return [(b - a) / 1e9 for a, b in self.pairs]
        torch.cuda.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in self.pairs]


def gpu_seconds(ctx: Ctx, fn: Callable[[], Any], reps: int = 10, warm: int = 3) -> float:
    """Median GPU time of ``fn`` (after ``warm`` untimed calls)."""
    for _ in range(warm):
        fn()
    spans = Spans(ctx.cuda)
    for _ in range(reps):
        spans.begin()
        fn()
        spans.end()
    return statistics.median(spans.seconds())


def to_device(batch: Any, dev: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(dev)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, dev) for b in batch)
    return batch


def hand_steps(ctx: Ctx, source: Iterable[Any], body: Callable[[Any], Any], steps: int):
    """A stopwatch per step as the tool defines one: from a next() call to the next; the wait
    is the time inside next(). One synchronise at the end, charged to the last step, as the
    tool does. Returns (step seconds, wait seconds)."""
    it = iter(source)
    starts: list[int] = []
    waits: list[float] = []
    for _ in range(steps):
        t0 = now()
        try:
            batch = next(it)
        except StopIteration:
            break
        starts.append(t0)
        waits.append((now() - t0) / 1e9)
        body(batch)
    ctx.sync()
    bounds = starts + [now()]
    del it  # a DataLoader's workers end here, outside the timed steps
    return [(b - a) / 1e9 for a, b in zip(bounds, bounds[1:])], waits


def hand_device_loop(ctx: Ctx, loader: Any, body: Callable[[Any], Any], steps: int, cache: int):
    """The ideal by hand: ``cache`` batches moved to the device once, then served in turn."""
    it = iter(loader)
    cached = [to_device(next(it), ctx.dev) for _ in range(cache)]
    del it
    return hand_steps(ctx, (cached[i % cache] for i in range(steps)), body, steps)


# ---- workloads -----------------------------------------------------------------------------


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


# The seed study's image pipeline: classes in a list ``.transforms``, as torchvision's
# Compose keeps them, so the ladder's split times each step where it runs (in the workers).


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


def hand_transform_split(ds: Photos, samples: int) -> dict[str, float]:
    """Seconds per sample of each step, timed by hand in this process on one thread (as a
    DataLoader worker runs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    per: dict[str, float] = {type(t).__name__: 0.0 for t in ds.transform.transforms}
    try:
        for i in range(samples):
            x = ds.pool[i % len(ds.pool)]
            for t in ds.transform.transforms:
                t0 = now()
                x = t(x)
                per[type(t).__name__] += (now() - t0) / 1e9
    finally:
        torch.set_num_threads(threads)
    return {k: v / samples for k, v in per.items()}


# ---- check 1: utilisation against nvidia-smi -----------------------------------------------


class Smi:
    """``nvidia-smi --query-gpu=timestamp,utilization.gpu -lms 100`` in a subprocess: the
    driver's own reading of the counter the tool reads through NVML, taken outside the tool.
    (The time stamp is added to the brief's query so that the two series line up.) ``ids``
    are tried in turn (the UUID first) until one gives readings."""

    QUERY = ["--query-gpu=timestamp,utilization.gpu", "--format=csv,noheader,nounits"]
    # a dry run's stand-in: prints nvidia-smi's format, so the reader and the parsing run
    STAND_IN = (
        "import datetime, time\n"
        "while True:\n"
        "    t = datetime.datetime.now().strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]\n"
        "    print(t + ', 0', flush=True)\n"
        "    time.sleep(0.1)\n"
    )

    def __init__(self, ids: Sequence[str], stand_in: bool = False) -> None:
        if stand_in:
            self.cmds = [[sys.executable, "-c", self.STAND_IN]]
        else:
            self.cmds = [["nvidia-smi", *self.QUERY, "-lms", "100", "-i", i] for i in ids]
        self.cmd = self.cmds[0]
        self.lines: list[tuple[int, str]] = []
        self.proc: Optional[subprocess.Popen] = None
        self.unix_minus_clock_ns = time.time_ns() - now()

    def __enter__(self) -> Smi:
        for cmd in self.cmds:
            self.cmd, self.lines = cmd, []
            try:
                self.proc = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
                )
            except OSError as e:  # no nvidia-smi: the figure fails with the reason, no crash
                self.lines, self.proc = [(now(), f"cannot start: {e}")], None
                break
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()
            deadline = time.monotonic() + 5  # nvidia-smi takes a moment to start
            while not self.series()[0] and time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break  # refused this id (its message is in self.lines): try the next
                time.sleep(0.05)
            if self.series()[0]:
                break
            self._stop()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((now(), line.strip()))

    def _stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # lets it flush; kill it if it will not end
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(3)

    def __exit__(self, *exc: Any) -> None:
        self._stop()

    def series(self) -> tuple[list[float], list[float]]:
        parsed = [(a, p) for a, line in list(self.lines) if (p := parse_smi_line(line))]
        times = smi_times_on_our_clock(
            [p[0] for _, p in parsed], [a for a, _ in parsed], self.unix_minus_clock_ns
        )
        return times, [p[1] for _, p in parsed]

    def describe(self) -> str:
        first = f", e.g. {self.lines[0][1]!r}" if self.lines else ""
        cmd = "a stand-in for nvidia-smi" if self.cmd[0] == sys.executable else " ".join(self.cmd)
        return f"{cmd}: {len(self.lines)} lines{first}"


def smi_gpu_ids() -> list[str]:
    """The GPU torch uses, as nvidia-smi -i names it: its UUID (indices may be renumbered by
    CUDA_VISIBLE_DEVICES), then its index."""
    index = str(torch.cuda.current_device())
    try:
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        return [uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", index]
    except Exception:
        return [index]


def tool_gpu_series(ev: LoaderEvaluator) -> Optional[tuple[list[int], list[Any]]]:
    """The tool's NVML series of the GPU in use, on our clock (the run's ``util.t_ns`` are
    relative to ``ev.started_ns``). None, with the tool's reason, without readings."""
    util = ev.to_run().util or {}
    gpu = util.get("gpu") or {}
    if not gpu.get("available"):
        return None
    origin = ev.started_ns or 0
    # one series per visible GPU in CUDA_VISIBLE_DEVICES order; torch's current device too
    index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return [origin + t for t in util["t_ns"]], gpu["util_pct"][index]


def util_case(ctx: Ctx, what: str, source: Iterable[Any], work: MatmulWork) -> list[Record]:
    busy = Spans(ctx.cuda)  # the GPU time of each step's work: the busy share, for the note
    ev = LoaderEvaluator(source, mode="log", sample_interval_s=0.1)
    with Smi(smi_gpu_ids() if ctx.cuda else [], stand_in=not ctx.cuda) as smi:
        first = None
        for x in ev:
            first = first or now()
            busy.begin()
            work(x)
            busy.end()
        last = now()  # the tool's epoch end has synchronised: the GPU work is done
    assert first is not None
    # both series over one window: past the first second (NVML's own averaging period
    # still holds the idle time before the loop), to the loop's end
    windows = [(first + 1e9, last - 0.1e9)]
    busy_pct = 100 * sum(busy.seconds()) / ((last - first) / 1e9)
    smi_mean, n_smi = window_mean(*smi.series(), windows)
    tool = tool_gpu_series(ev)
    if tool is None:
        reason = ((ev.to_run().util or {}).get("gpu") or {}).get("reason")
        tool_mean, n_tool, why = None, 0, f"the tool has no NVML readings ({reason}); "
    else:
        tool_mean, n_tool = window_mean(*tool, windows)
        why = ""
    note = (
        f"{why}{n_tool} tool readings, {n_smi} nvidia-smi readings over "
        f"{(last - first) / 1e9:.1f} s; GPU busy by CUDA events {busy_pct:.0f} %; "
        f"{smi.describe()}"
    )
    rec = near("util", f"{what}: GPU utilisation (tool, NVML)", tool_mean, smi_mean, 5, note)
    return [ctx.gpu_only(rec, "NVML")]


def check_util(ctx: Ctx) -> list[Record]:
    work = MatmulWork(ctx, 0.005)
    seconds = ctx.pick(6.0, 3.0, 1.2)
    recs = util_case(ctx, "busy loop", range(int(seconds / work.step_s)), work)
    # starved: the loader sleeps 10 ms an item, the step queues ~5 ms of GPU work and goes
    # back to wait: the GPU is busy about a third to a half of the time
    sleep_s = 0.010
    starved = DataLoader(Sleepy(int(seconds / sleep_s), sleep_s), batch_size=None)
    return recs + util_case(ctx, "starved loop (sleep in the loader)", starved, work)


# ---- check 2: the ideal is ideal ------------------------------------------------------------


def check_ideal(ctx: Ctx) -> list[Record]:
    res = ctx.pick(160, 160, 32)
    train, batch, step_s = calibrated_cnn(ctx, res)
    steps = max(40, int(ctx.pick(4.0, 2.0, 0.2) / step_s))
    warmup, dev = 5, ctx.dev

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            train(x.to(dev, non_blocking=True))

    # uint8 images, pinned: the copy is ~1 % of the step (becomes floats on the GPU)
    pinned = DataLoader(
        Repeat(images(4 * batch, res), batch * (steps + 8)), batch_size=batch, pin_memory=ctx.cuda
    )
    common = dict(mode="replay", num_cached_batches=4, steps=steps, warmup=warmup)
    on_dev = LoaderEvaluator(pinned, cache_on=ctx.cache_on(), **common)
    on_host = LoaderEvaluator(pinned, cache_on="host", **common)
    for ev in (on_dev, on_host, on_host, on_dev):  # ABBA: drift lands on both
        run_once(ev)
    dev_run, host_run = on_dev.to_run(), on_host.to_run()
    dev_step, host_step = mean(dev_run.steady_step_s()), mean(host_run.steady_step_s())
    recs = []
    tool = tool_gpu_series(on_dev)
    if tool is not None:
        wins = steady_windows(
            dev_run.start_ns,
            dev_run.step_ns,
            dev_run.epoch,
            dev_run.steady_indices(),
            on_dev.started_ns or 0,
            int(0.5e9),
        )
        util, n = window_mean(tool[0], tool[1], wins)
        whole = fmt_value(dev_run.mean_gpu_util_pct(), "%")
        note = f"{n} readings over the steady steps; {whole} over the whole run"
    else:
        util, note = None, "no NVML readings"
    shape = f"{batch} x 3 x {res}^2 uint8, {ms(step_s):.1f} ms a step"
    what = f"device-cached ideal: GPU utilisation (NVML; {shape})"
    recs.append(ctx.gpu_only(at_least("ideal", what, util, 95.0, "%", note), "NVML"))
    pinned_cache = bool(on_host.cached_batches) and on_host.cached_batches[0].is_pinned()
    recs.append(
        ctx.gpu_only(
            same(
                "ideal",
                "host cache keeps the loader's pinned memory",
                pinned_cache,
                True,
                pinned_cache,
                "pinned",
            ),
            "pinning needs CUDA",
        )
    )
    recs.append(
        ctx.gpu_only(
            rel(
                "ideal",
                "host-cached step (pinned, non_blocking) vs device-cached step",
                ms(host_step),
                ms(dev_step),
                0.05,
                "ms",
            ),
            "no device cache without CUDA",
        )
    )
    recs += ladder_copy_cost(ctx, train, batch, res, step_s)
    return recs


def ladder_copy_cost(ctx: Ctx, train: Trainer, batch: int, res: int, step_s: float):
    """Unpinned float32 batches: the ladder's host rung minus its device rung against the
    same two loops timed by hand (host batches copied each step; batches already on the
    device). The isolated copy, by CUDA events, is in the note: the added step time can be
    a little less where the staging of a pageable copy overlaps the previous step."""
    steps, warmup, cache, dev = max(30, int(ctx.pick(3.0, 1.5, 0.2) / step_s)), 5, 4, ctx.dev
    floats = DataLoader(
        Repeat(images(4 * batch, res, torch.float32), batch * (steps + 8)), batch_size=batch
    )

    def body(x: torch.Tensor) -> None:
        train(x.to(dev, non_blocking=True))

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            body(x)

    settings = RunSettings(
        steps=steps, warmup=warmup, num_cached_batches=cache, sample_interval_s=None
    )
    ladder = run_ladder(floats, run_once, settings, rungs=("device", "host"), transforms=None)
    if not ladder.ok:
        raise RuntimeError(f"the ladder failed: {ladder.error!r}")
    stage = next((st for st in ladder.stages if st.name == "host"), None)
    # the truths, by hand, ABBA
    it = iter(floats)
    host = [next(it) for _ in range(cache)]
    del it
    hand: dict[str, list[float]] = {"A": [], "B": []}
    for side in abba(2):
        if side == "A":
            s, _ = hand_device_loop(ctx, floats, body, steps, cache)
        else:
            s, _ = hand_steps(ctx, (host[i % cache] for i in range(steps)), body, steps)
        hand[side] += steady(s, warmup)
    hand_dev, hand_host = mean(hand["A"]), mean(hand["B"])
    added_truth = hand_host - hand_dev if hand_host and hand_dev else None
    x = host[0]
    copy_s = gpu_seconds(ctx, lambda: x.to(dev, non_blocking=True))
    share = added_truth / hand_host if added_truth is not None and hand_host else None
    counts_truth = share is not None and share >= 0.05  # the ladder's own 5 % floor
    counted = bool(stage and stage.significant)
    lo, hi = stage.ratio_ci if stage else (None, None)
    mib = batch * 3 * res * res * 4 / 2**20
    note = (
        f"{ladder.conclusion()} Host-rung ratio CI {fmt_value(lo)}-{fmt_value(hi)}; by hand: "
        f"host {fmt_value(ms(hand_host), 'ms')}, device {fmt_value(ms(hand_dev), 'ms')}, the "
        f"{mib:.1f} MiB copy alone {fmt_value(ms(copy_s), 'ms')} (CUDA events)"
    )
    return [
        ctx.gpu_only(
            same(
                "ideal",
                "unpinned float32: the ladder counts the host-to-device stage",
                counted,
                counts_truth,
                counted == counts_truth,
                "as the hand-timed share says (>= 5 % counts)",
                note,
            ),
            "no device rung without CUDA",
        ),
        ctx.gpu_only(
            rel(
                "ideal",
                "unpinned: host rung - device rung vs the same by hand",
                ms(stage.added_s if stage else None),
                ms(added_truth),
                0.25,
                "ms",
            ),
            "no device rung without CUDA",
        ),
    ]


# ---- check 3: the split of a real step -------------------------------------------------------


def check_split(ctx: Ctx) -> list[Record]:
    batch, res = ctx.pick(64, 64, 4), ctx.pick(224, 224, 32)
    steps, warmup, wait_s = ctx.pick(60, 30, 10), 3, 0.004
    dev = ctx.dev
    # uint8 images, 4 ms of collation sleep a batch, no workers: a known wait in next()
    loader = DataLoader(
        Repeat(images(8, res), batch * (steps + 2)),
        batch_size=batch,
        collate_fn=SleepyCollate(wait_s),
    )
    train = Trainer(ConvNet(*ctx.pick((32, 2), (32, 2), (4, 1))).to(dev))
    train(torch.zeros(batch, 3, res, res, device=dev)).item()  # cuDNN picks its kernels now

    def body(b: torch.Tensor) -> None:
        x = b.float()  # on the host, on purpose: four times the bytes to copy
        x = x.to(dev)  # pageable: the copy the tool must time
        loss = train(x)
        # reading the loss every step (as a logger does) makes wait, copy and compute run
        # one after another, so that they must add up to the step
        loss.item()

    convert: list[float] = []
    copies, compute = Spans(ctx.cuda), Spans(ctx.cuda)

    def timed_body(b: torch.Tensor) -> None:  # body, with a stopwatch and CUDA events
        t0 = now()
        x = b.float()
        convert.append((now() - t0) / 1e9)
        copies.begin()
        x = x.to(dev)
        copies.end()
        compute.begin()
        loss = train(x)
        compute.end()
        loss.item()

    ev = LoaderEvaluator(loader, mode="log", steps=steps, warmup=warmup)
    hand_step: list[float] = []
    hand_wait: list[float] = []
    for side in abba(2):  # tool, hand, hand, tool
        if side == "A":
            for b in ev:
                body(b)
        else:
            s, w = hand_steps(ctx, loader, timed_body, steps)
            hand_step += steady(s, warmup)
            hand_wait += steady(w, warmup)
    # per hand pass, drop its warm-up steps from the per-step parts too
    keep = [i for p in range(2) for i in range(p * steps + max(warmup, 1), (p + 1) * steps)]
    copy_s, comp_s = copies.seconds(), compute.seconds()
    hand_copy = mean(copy_s[i] for i in keep)
    hand_rest = mean(convert[i] + comp_s[i] for i in keep)  # host conversion + GPU compute
    ideal = LoaderEvaluator(
        loader,
        mode="replay",
        num_cached_batches=4,
        cache_on=ctx.cache_on(),
        steps=steps,
        warmup=warmup,
    )
    for b in ideal:
        body(b)
    d = diagnose(ev, ideal)
    parts = None
    if d.real_wait_s is not None and d.real_h2d_s is not None and hand_rest is not None:
        parts = d.real_wait_s + d.real_h2d_s + hand_rest
    size = f"{batch} x 3 x {res}^2 float32 = {batch * 3 * res * res * 4 / 2**20:.1f} MiB"
    return [
        ctx.gpu_only(
            rel(
                "split",
                f"host-to-device copy per step ({size}, pageable)",
                ms(d.real_h2d_s),
                ms(hand_copy),
                0.10,
                "ms",
                "tool: Diagnosis.real_h2d_s; truth: CUDA events around the same copies",
            ),
            "the tool times copies with CUDA events",
        ),
        rel(
            "split",
            "input wait per step (next())",
            ms(d.real_wait_s),
            ms(mean(hand_wait)),
            0.10,
            "ms",
            f"{ms(wait_s):.0f} ms of it is the collate_fn's sleep",
        ),
        rel("split", "real step", ms(d.real_step_s), ms(mean(hand_step)), 0.05, "ms"),
        ctx.gpu_only(
            rel(
                "split",
                "wait + copy (tool) + compute and the rest (by hand) vs the tool's step",
                ms(parts),
                ms(d.real_step_s),
                0.10,
                "ms",
                f"by hand: host conversion + GPU compute = {fmt_value(ms(hand_rest), 'ms')}",
            ),
            "no copy time without CUDA",
        ),
        ctx.gpu_only(
            same(
                "split",
                "the verdict names the copies",
                "host-to-device copies" in str(d),
                True,
                "host-to-device copies" in str(d),
                "in the report",
            ),
            "no copy time without CUDA",
        ),
    ]


# ---- check 4: no observer effect on CUDA ----------------------------------------------------

SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")


def block_seconds(source: Iterable[Any], n: int, work: MatmulWork) -> float:
    """Wall time from the first step's start to the last one's end. Each step reads a value
    back (as a loss logger does), so the host cannot run ahead of the GPU and anything the
    tool adds to a step lands in the step's time; a GPU-bound loop whose host runs ahead
    would hide it. The epoch's opening and closing (the tool's closing synchronise, the
    sampler's pause) stay outside: they are once an epoch, not once a step."""
    t0 = t1 = 0
    for i, x in enumerate(source):
        if i == 0:
            t0 = now()
        work(x)
        work.read()
        if i == n - 1:
            t1 = now()
    return (t1 - t0) / 1e9


def check_observer(ctx: Ctx) -> list[Record]:
    work = MatmulWork(ctx, 0.005)
    n, pairs = ctx.pick(100, 60, 10), ctx.pick(20, 10, 3)
    src = list(range(n))
    ev = LoaderEvaluator(src, mode="log")  # samplers on, as a user runs it
    block_seconds(src, n, work)  # warm-up
    times: dict[str, list[float]] = {"A": [], "B": []}
    for side in abba(pairs):  # A: the bare loop, B: the same loop through log mode
        times[side].append(block_seconds(src if side == "A" else ev, n, work))
    bare, logged = statistics.median(times["A"]), statistics.median(times["B"])
    spread = statistics.pstdev(times["A"]) / bare if len(times["A"]) > 1 else 0.0
    recs = [
        Record(
            "observer",
            "step time, log mode vs the bare loop (medians of blocks)",
            ms(logged / n),
            ms(bare / n),
            logged / bare <= 1.001,
            "ratio <= 1.001",
            "ms",
            f"log mode adds {100 * (logged / bare - 1):+.3f} %; {pairs} ABBA pairs of {n}-step "
            f"blocks of a ~{ms(work.step_s):.1f} ms step; spread of the bare blocks "
            f"{100 * spread:.3f} %",
        )
    ]
    recs += sync_counts(ctx, work)
    return recs


def sync_counts(ctx: Ctx, work: MatmulWork) -> list[Record]:
    n = ctx.pick(200, 100, 10)
    host = [torch.randn(64, 1024) for _ in range(4)]
    if ctx.cuda:
        host = [h.pin_memory() for h in host]
    source = [host[i % 4] for i in range(n)]

    def body(x: torch.Tensor) -> None:  # a copy each step, so copy timing is on the path
        x.to(ctx.dev, non_blocking=True)
        work()

    # 1. torch.cuda.synchronize, counted by wrapping it while one log-mode epoch runs
    calls = 0
    real_sync = torch.cuda.synchronize

    def counting(*a: Any, **k: Any) -> Any:
        nonlocal calls
        calls += 1
        return real_sync(*a, **k)

    ev = LoaderEvaluator(source, mode="log")
    torch.cuda.synchronize = counting
    try:
        for x in ev:
            body(x)
    finally:
        torch.cuda.synchronize = real_sync
    # 2. the profiler: CUDA runtime synchronise calls between the first step and the last
    from torch.profiler import ProfilerActivity, profile, record_function

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    ev2 = LoaderEvaluator(source[: ctx.pick(50, 30, 5)], mode="log")
    with profile(activities=acts) as prof:
        for x in ev2:
            with record_function("gpu_truth_step"):
                body(x)
    events = prof.events()
    marks = [e.time_range for e in events if e.name == "gpu_truth_step"]
    lo, hi = min(r.start for r in marks), max(r.end for r in marks)
    inside = [e for e in events if e.name in SYNC_CALLS and lo <= e.time_range.start <= hi]
    seen = sorted({e.name for e in events if e.name in SYNC_CALLS})
    return [
        at_most(
            "observer",
            f"torch.cuda.synchronize calls in a {n}-step log epoch",
            calls,
            1,
            "",
            "the one allowed: the epoch's closing synchronise",
        ),
        at_most(
            "observer",
            f"CUDA synchronise calls inside {len(marks)} profiled steps",
            len(inside),
            0,
            "",
            f"profiler: {', '.join(seen) or 'none'} in the whole profile",
        ),
    ]


# ---- check 5: the seed study, end to end ------------------------------------------------------


def check_seed(ctx: Ctx) -> list[Record]:
    out = ctx.pick(224, 224, 32)
    batch, workers = ctx.pick(16, 16, 4), ctx.pick(4, 4, 2)
    steps, warmup, cache = ctx.pick(30, 18, 16), 4, ctx.pick(4, 3, 2)
    # (image size, crop, dilation kernel): the costly pipeline, then the fix (smaller images
    # and a 3x3 dilation); both are scaled to ``out`` so the model's step stays the same
    costly = ctx.pick((1024, 768, 9), (1024, 768, 9), (96, 80, 5))
    fixed = ctx.pick((256, 224, 3), (256, 224, 3), (40, 32, 3))
    train = Trainer(ConvNet(*ctx.pick((64, 4), (64, 4), (4, 1))).to(ctx.dev))
    dev = ctx.dev

    def body(x: torch.Tensor) -> None:
        train(x.to(dev, non_blocking=True))

    def run_once(loader: Iterable[torch.Tensor]) -> None:
        for x in loader:
            body(x)

    def loader_of(size: int, crop: int, k: int) -> DataLoader:
        ds = Photos(batch * (steps + 4) * 2, size, pipeline(crop, k, out))
        return DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=ctx.cuda)

    settings = RunSettings(
        steps=steps, warmup=warmup, num_cached_batches=cache, cache_on=ctx.cache_on()
    )
    body(torch.zeros(batch, 3, out, out))  # cuDNN picks its kernels before anything is timed
    recs: list[Record] = []
    found = {}
    for name, (size, crop, k) in (("costly", costly), ("fixed", fixed)):
        dl = loader_of(size, crop, k)
        pair = run_pair(dl, run_once, settings)
        if not pair.ok or pair.diagnosis is None:
            raise RuntimeError(f"the {name} pair failed: {pair.error!r}")
        d = found[name] = pair.diagnosis
        # the truths: the same loop timed by hand on the real loader and on a device cache
        real_s = mean(steady(hand_steps(ctx, dl, body, steps)[0], warmup))
        ideal_s = mean(steady(hand_device_loop(ctx, dl, body, steps, cache)[0], warmup))
        hand = real_s / ideal_s if real_s and ideal_s else None
        tag = f"{name} ({size}^2 images)"
        ci = f"95% CI {fmt_value(d.speedup_ci[0])}-{fmt_value(d.speedup_ci[1])}"
        recs += [
            rel("seed", f"{tag}: real step", ms(d.real_step_s), ms(real_s), 0.10, "ms"),
            rel("seed", f"{tag}: ideal step", ms(d.ideal_step_s), ms(ideal_s), 0.10, "ms"),
            rel("seed", f"{tag}: speedup with an ideal loader", d.speedup, hand, 0.15, "x", ci),
            same(
                "seed",
                f"{tag}: verdict",
                d.verdict,
                expected_verdict(hand),
                verdict_agrees(d.verdict, hand),
                "as the hand speedup calls for",
            ),
        ]
        if name == "costly":
            recs += seed_ladder(ctx, dl, run_once, settings, ideal_s, batch, workers)
    before, after = found["costly"], found["fixed"]
    turned = after.verdict != INPUT_BOUND or (
        after.speedup is not None
        and before.speedup is not None
        and after.speedup <= before.speedup / 2
    )
    recs.append(
        same(
            "seed",
            "after the fix: verdict, speedup",
            f"{after.verdict}, {fmt_value(after.speedup, 'x')}",
            f"not {INPUT_BOUND}, or under half of {fmt_value(before.speedup, 'x')}",
            turned,
            "the verdict turns",
        )
    )
    return recs


def seed_ladder(ctx, dl, run_once, settings, ideal_s, batch, workers) -> list[Record]:
    """The ladder on the costly pipeline: its largest stage and costliest transform step vs
    the transforms timed by hand, one sample at a time on one thread."""
    ladder = run_ladder(dl, run_once, settings)
    if not ladder.ok:
        raise RuntimeError(f"the ladder failed: {ladder.error!r}")
    per = hand_transform_split(dl.dataset, ctx.pick(8, 4, 4))
    per_batch = sum(per.values()) * batch / workers  # what the workers need per step
    truth_stage = "per-sample loading and transforms" if ideal_s and per_batch > ideal_s else "none"
    got = ladder.largest.what if ladder.largest else "none"
    total = sum(per.values())
    hand_top = max(per, key=per.get)
    split = ladder.transforms
    top = next((p for p in split.parts if not p.rest), None) if split is not None else None
    got_name = top.name if top else None
    # a near tie with the hand's top step is noise deciding, not a wrong name
    close = got_name in per and per[hand_top] - per[got_name] <= 0.05 * total
    return [
        same(
            "seed",
            "ladder: largest stage",
            got,
            truth_stage,
            got == truth_stage,
            "the transforms' time a batch over the workers exceeds the ideal step",
            f"hand: {ms(per_batch):.1f} ms of transforms a step over {workers} workers vs "
            f"{fmt_value(ms(ideal_s), 'ms')} ideal; {ladder.conclusion()}",
        ),
        same(
            "seed",
            "ladder: costliest transform step",
            f"{got_name} ({fmt_value(100 * top.share if top and top.share else None, '%')})",
            f"{hand_top} ({100 * per[hand_top] / total:.1f} % by hand)",
            got_name == hand_top or close,
            "the same step (or within 5 points of it)",
            "by hand, per sample: "
            + ", ".join(
                f"{k} {ms(v):.1f} ms" for k, v in sorted(per.items(), key=lambda kv: -kv[1])
            ),
        ),
    ]


# ---- check 6: the gpu tests, the demo, the magic in a kernel ---------------------------------


def run_cmd(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    t = time.perf_counter()
    try:
        p = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
        return p.returncode, p.stdout + p.stderr, time.perf_counter() - t
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {timeout:.0f} s)", time.perf_counter() - t


NB_SETUP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
device = {device!r}
dl = DataLoader(TensorDataset(torch.randn({n}, 3, 64, 64)), batch_size=32, pin_memory={pin})
w = torch.randn(3, device=device)
"""
NB_MAGIC = """\
%%loadeval dl --ladder --steps {steps} --warmup 2 --cache 3
for (x,) in dl:
    x = x.to(device, non_blocking=True)
    (x.mean(dim=(0, 2, 3)) * w).sum().item()
"""
NB_PROBE = """\
import json
def _run(rung):  # a rung's Run
    return rung.run
_r = _loadeval
_runs = {g.name: _run(g) for g in _r.rungs if g.skipped is None}
_dev = _runs.get("device")
print("PROBE " + json.dumps({
    "ok": _r.ok,
    "ran": [name for name, run in _runs.items() if run is not None],
    "device_cache_on": (_dev.settings or {}).get("cache_on") if _dev is not None else None,
    "gpu_util": {name: run.mean_gpu_util_pct() for name, run in _runs.items() if run is not None},
    "conclusion": _r.conclusion(),
}))
"""


def notebook_probe(ctx: Ctx) -> tuple[dict[str, Any], float]:
    """Build a notebook in memory, run it in a real kernel (nbclient), read the probe."""
    import nbformat
    from nbclient import NotebookClient

    steps = ctx.pick(20, 16, 12)
    cells = [
        NB_SETUP.format(device=ctx.dev.type, n=32 * (steps + 4), pin=ctx.cuda),
        "%load_ext loadeval_nb",
        NB_MAGIC.format(steps=steps),
        NB_PROBE,
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    t = time.perf_counter()
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ctx.tmp)}}
    ).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    line = next(ln for ln in text.splitlines() if ln.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :]), time.perf_counter() - t


def check_suite(ctx: Ctx) -> list[Record]:
    recs: list[Record] = []
    # 1. the gpu-marked tests (on CPU they all skip: that is what a dry run shows)
    rc, out, secs = run_cmd(
        [sys.executable, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-p", "no:cacheprovider"],
        timeout=ctx.pick(420, 420, 120),
    )
    counts = pytest_counts(out)
    got = ", ".join(f"{v} {k}" for k, v in counts.items()) or out.strip()[-300:]
    ok = rc == 0 and counts.get("passed", 0) > 0 and not counts.get("skipped")
    rec = same(
        "suite",
        "pytest -m gpu tests/gpu",
        f"{got} (exit {rc}, {secs:.0f} s)",
        "all pass, none skipped",
        ok,
        "exit 0",
    )
    if rc != 0:
        print(out[-3000:])
    recs.append(rec if ctx.cuda else replace(rec, ok=rc == 0, truth="exit 0 (all skip on CPU)"))
    # 2. the demo, on the device
    demo_out = ctx.tmp / "demo.html"
    cmd = [
        sys.executable,
        "-m",
        "loadeval_nb",
        "demo",
        "--device",
        ctx.dev.type,
        "--out",
        str(demo_out),
        *ctx.pick([], ["--steps", "30"], ["--steps", "12", "--warmup", "2", "--batch-size", "8"]),
    ]
    rc, out, secs = run_cmd(cmd, timeout=300)
    verdict = next((ln.strip() for ln in out.splitlines() if ln.startswith("Verdict:")), None)
    gpu_line = next((ln.strip() for ln in out.splitlines() if "GPU utilisation:" in ln), "")
    if rc != 0 or verdict is None:
        print(out[-3000:])
    recs.append(
        same(
            "suite",
            f"demo on {ctx.dev.type}: verdict",
            f"{verdict} ({secs:.0f} s)",
            "a verdict, a report file",
            rc == 0 and verdict is not None and demo_out.exists(),
            "exit 0",
        )
    )
    recs.append(
        ctx.gpu_only(
            same(
                "suite",
                "demo on CUDA: GPU utilisation read",
                gpu_line,
                "numbers, not n/a",
                bool(gpu_line) and "n/a" not in gpu_line,
                "NVML readings",
            ),
            "NVML",
        )
    )
    # 3. %%loadeval --ladder in a real kernel
    probe, secs = notebook_probe(ctx)
    want = ["device", "host", "samples", "real"] if ctx.cuda else ["host", "samples", "real"]
    recs.append(
        same(
            "suite",
            f"%%loadeval --ladder in a kernel: rungs that ran ({secs:.0f} s)",
            ", ".join(probe["ran"]),
            ", ".join(want),
            probe["ok"] and probe["ran"] == want,
            "every rung the device allows",
            probe["conclusion"],
        )
    )
    util = (probe.get("gpu_util") or {}).get("device")
    cache_on = probe.get("device_cache_on")
    recs.append(
        ctx.gpu_only(
            same(
                "suite",
                "%%loadeval --ladder: the device rung's cache and its NVML readings",
                f"cache_on={cache_on}, GPU {fmt_value(util, '%')}",
                "cache_on=device, a reading",
                cache_on == "device" and util is not None,
                "on the GPU, read",
            ),
            "no device rung without CUDA",
        )
    )
    return recs


# ---- check 0 (dry run only): the pure maths ----------------------------------------------------


def check_maths(ctx: Ctx) -> list[Record]:
    """The reporting and alignment maths against answers worked out by hand."""
    stamp = dt.datetime(2025, 1, 15, 10, 23, 45, 123000).timestamp()
    cases = [
        ("parse_smi_line", parse_smi_line("2025/01/15 10:23:45.123, 97"), (stamp, 97.0)),
        ("parse_smi_line on [N/A]", parse_smi_line("2025/01/15 10:23:45.123, [N/A]"), None),
        ("window_mean", window_mean([0, 1, 2, 3], [10, 20, None, 40], [(1, 3)]), (30.0, 2)),
        ("ratio_of_medians", ratio_of_medians([2, 4, 100], [1, 2, 3]), 2.0),
        ("abba", "".join(abba(3)), "ABBAAB"),
        ("steady", steady([9, 1, 2, 3], 0), [1, 2, 3]),
        (
            "steady_windows",
            steady_windows(
                [0, 10, 20, 0, 10], [10, 10, 10, 10, 10], [0, 0, 0, 1, 1], [1, 2, 4], 100, 1
            ),
            [(111, 130), (111, 120)],
        ),
        ("smi clock, same zone", smi_times_on_our_clock([10.0], [int(5e9)], int(5e9)), [5e9]),
        (
            "smi clock, zone off by 1 h",
            smi_times_on_our_clock([3610.0], [int(5e9)], int(5e9)),
            [5e9],
        ),
        (
            "expected_verdict",
            [expected_verdict(s) for s in (1.3, 1.1, 1.01)],
            [INPUT_BOUND, PARTLY_INPUT_BOUND, NOT_INPUT_BOUND],
        ),
        ("verdict_agrees near 1.25x", verdict_agrees(PARTLY_INPUT_BOUND, 1.27), True),
        (
            "pytest_counts",
            pytest_counts("..\n3 passed, 1 skipped in 2.0s"),
            {"passed": 3, "skipped": 1},
        ),
        ("Record.ratio", Record("m", "x", 3.0, 2.0, True, "").ratio(), 1.5),
    ]
    return [same("maths", name, got, want, got == want, "equal") for name, got, want in cases]


CHECKS: dict[str, Callable[[Ctx], list[Record]]] = {
    "util": check_util,
    "ideal": check_ideal,
    "split": check_split,
    "observer": check_observer,
    "seed": check_seed,
    "suite": check_suite,
}


def run_check(name: str, ctx: Ctx) -> tuple[list[Record], bool]:
    """Run one check; an exception is one failed record, and the other checks still run.
    Returns the records and whether it raised."""
    print(f"\n[{name}]", flush=True)
    t = time.perf_counter()
    raised = False
    fn = check_maths if name == "maths" else CHECKS[name]
    try:
        recs = fn(ctx) or [same(name, "records", "none", "some", False, "a check reports")]
    except Exception as e:
        raised = True
        print("    " + traceback.format_exc().replace("\n", "\n    ").rstrip())
        recs = [
            same(
                name,
                "ran to the end",
                f"raised {type(e).__name__}: {e}",
                "no exception",
                False,
                "runs",
            )
        ]
    finally:
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()
    for r in recs:
        print(format_record(r), flush=True)
    print(f"  ({time.perf_counter() - t:.0f} s)", flush=True)
    return recs, raised


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="shorter runs (wider noise)")
    ap.add_argument("--only", choices=[*CHECKS, "maths"], help="run one check")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        default=os.environ.get(DRY_ENV, "") not in ("", "0"),
        help="run every check's code on CPU with tiny sizes (figures mean nothing)",
    )
    args = ap.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():  # main() called from Python
        print(NO_CUDA_LINE)
        return 0
    dev = torch.device("cpu" if args.dry_run else "cuda")
    torch.backends.cudnn.benchmark = True  # convolutions tuned once per shape, in warm-ups
    names = [args.only] if args.only else (["maths"] if args.dry_run else []) + list(CHECKS)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_truth-") as tmp:
        ctx = Ctx(dev, args.dry_run, args.quick, Path(tmp))
        where = torch.cuda.get_device_name() if ctx.cuda else "CPU (dry run)"
        print(
            f"gpu_truth: {where}; torch {torch.__version__}, loadeval_nb {__version__}; "
            f"{'quick' if args.quick else 'full'} runs; checks: {', '.join(names)}",
            flush=True,
        )
        records: list[Record] = []
        any_raised = False
        for name in names:
            recs, raised = run_check(name, ctx)
            records += recs
            any_raised |= raised
    print(f"\n({time.perf_counter() - started:.0f} s in all)")
    print(summary_line(records, args.dry_run))
    if args.dry_run:
        return 1 if any_raised else 0
    return 0 if all(r.ok is not False for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
