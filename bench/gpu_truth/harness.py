"""Where the checks run (``Ctx``: the device, dry or quick) and the timing they take beside
the tool: CUDA events read once at the end, stopwatches around ``next()`` and the step,
the tool's own NVML series put on our clock."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from loadeval_nb import LoaderEvaluator

from .maths import ms
from .report import Record, fmt_value, same

now = time.perf_counter_ns  # the tool's default clock: its stamps and ours share one origin


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


def hand_steps(
    ctx: Ctx,
    source: Iterable[Any],
    body: Callable[[Any], Any],
    steps: int,
    frees: Optional[list[float]] = None,
):
    """A stopwatch per step as the tool defines one: from a next() call to the next; the wait
    is the time inside next(). The previous batch is let go after the wait's stopwatch, inside
    the step (as a ``for`` loop rebinds its variable once next() has returned): freeing a large
    batch takes a large unmapping, which is the step's, not the loader's. ``frees``, if given,
    gets the seconds each of those took. One synchronise at the end, charged to the last step,
    as the tool does. Returns (step seconds, wait seconds)."""
    it = iter(source)
    starts: list[int] = []
    waits: list[float] = []
    batch: Any = None
    for _ in range(steps):
        t0 = now()
        try:
            new = next(it)
        except StopIteration:
            break
        starts.append(t0)
        t1 = now()
        waits.append((t1 - t0) / 1e9)
        batch, new = new, None  # the previous batch goes here
        if frees is not None:
            frees.append((now() - t1) / 1e9)
        body(batch)
    ctx.sync()
    bounds = starts + [now()]
    del it, batch  # a DataLoader's workers end here, outside the timed steps
    return [(b - a) / 1e9 for a, b in zip(bounds, bounds[1:])], waits


def hand_device_loop(ctx: Ctx, loader: Any, body: Callable[[Any], Any], steps: int, cache: int):
    """The ideal by hand: ``cache`` batches moved to the device once, then served in turn."""
    it = iter(loader)
    cached = [to_device(next(it), ctx.dev) for _ in range(cache)]
    del it
    return hand_steps(ctx, (cached[i % cache] for i in range(steps)), body, steps)


def hand_split(
    steps: Iterable[Callable[[Any], Any]],
    raw: Callable[[int], Any],
    samples: int,
    read: Optional[str] = None,
) -> dict[str, float]:
    """Seconds per sample of each step of a pipeline (``steps``, named by their class),
    timed by hand in this process on one thread, as a DataLoader worker runs it, over the
    raw samples ``raw(i)``; ``read``: the name under which ``raw`` itself is timed (the
    file read), left out where None."""
    steps = list(steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    per: dict[str, float] = {
        **({read: 0.0} if read else {}),
        **{type(t).__name__: 0.0 for t in steps},
    }
    try:
        for i in range(samples):
            t0 = now()
            x = raw(i)
            if read:
                per[read] += (now() - t0) / 1e9
            for t in steps:
                t0 = now()
                x = t(x)
                per[type(t).__name__] += (now() - t0) / 1e9
    finally:
        torch.set_num_threads(threads)
    return {k: v / samples for k, v in per.items()}


def ladder_records(
    check: str,
    ladder: Any,
    per: dict[str, float],
    read: Optional[str],
    batch: int,
    workers: int,
    ideal_s: Optional[float],
) -> list[Record]:
    """The ladder's largest stage and costliest transform step against the steps timed by
    hand (:func:`hand_split`'s ``per``; ``read`` counted in the loading, not a step)."""
    steps = {k: v for k, v in per.items() if k != read}
    per_batch = sum(per.values()) * batch / workers  # what the workers need a step
    truth_stage = "per-sample loading and transforms" if ideal_s and per_batch > ideal_s else "none"
    got = ladder.largest.what if ladder.largest else "none"
    total = sum(steps.values())
    hand_top = max(steps, key=steps.__getitem__)
    split = ladder.transforms
    top = next((p for p in split.parts if not p.rest), None) if split is not None else None
    got_name = top.name if top else None
    # a near tie with the hand's top step is noise deciding, not a wrong name
    close = got_name in steps and steps[hand_top] - steps[got_name] <= 0.05 * total
    return [
        same(
            check,
            "ladder: largest stage",
            got,
            truth_stage,
            got == truth_stage,
            "the loading's time a batch over the workers exceeds the ideal step",
            f"hand: {ms(per_batch):.1f} ms of loading a step over {workers} workers vs "
            f"{fmt_value(ms(ideal_s), 'ms')} ideal; {ladder.conclusion()}",
        ),
        same(
            check,
            "ladder: costliest transform step",
            f"{got_name} ({fmt_value(100 * top.share if top and top.share else None, '%')})",
            f"{hand_top} ({100 * steps[hand_top] / total:.1f} % by hand)",
            got_name == hand_top or close,
            "the same step (or within 5 points of it)",
            "by hand, per sample: "
            + ", ".join(
                f"{k} {ms(v):.2f} ms" for k, v in sorted(per.items(), key=lambda kv: -kv[1])
            ),
        ),
    ]


def tool_gpu_series(ev: LoaderEvaluator) -> Optional[tuple[list[int], list[Any]]]:
    """The tool's NVML series of the GPU in use, on our clock (the run's ``util.t_ns`` are
    relative to ``ev.started_ns``). None without readings."""
    util = ev.to_run().util or {}
    gpu = util.get("gpu") or {}
    if not gpu.get("available") or not gpu.get("util_pct"):
        return None
    origin = ev.started_ns or 0
    # one series per visible GPU in CUDA_VISIBLE_DEVICES order; torch's current device too
    index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    series = gpu["util_pct"]
    return [origin + t for t in util["t_ns"]], series[min(index, len(series) - 1)]


def tool_gpu_reason(ev: LoaderEvaluator) -> Optional[str]:
    """Why the tool has no NVML readings, in its own words."""
    return ((ev.to_run().util or {}).get("gpu") or {}).get("reason")


ROOT = Path(__file__).resolve().parents[2]  # the checkout: the tests, the demo, the package


def child_env() -> dict[str, str]:
    """The environment of a child (pytest, the demo, the notebook's kernel): this one, with
    the checkout first on PYTHONPATH, so that a child imports the same loadeval_nb as this
    process where the package is not installed (a bare GPU machine)."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *(p for p in paths if p != str(ROOT))])
    return env
