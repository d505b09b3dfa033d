"""One measured run: raw per-step arrays plus context, and the statistics derived from them.

A :class:`Run` is built from an evaluator's epoch stamps by :func:`build_run` and
written and read as a run log by :mod:`._runlog`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from ._readers import gpu_mean_per_tick
from ._stats import describe
from ._timing import EpochRecord, epoch_steps

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Run:
    """One measured run (real or ideal): raw per-step arrays plus context.

    Statistics are derived on demand from the raw arrays; nothing derived is
    trusted from disk.
    """

    mode: str
    start_ns: list[int]
    step_ns: list[int]
    wait_ns: Optional[list[int]] = None
    samples: list[Optional[int]] = field(default_factory=list)
    epoch: list[int] = field(default_factory=list)
    complete: list[bool] = field(default_factory=list)
    warmup_steps: int = 0
    label: Optional[str] = None
    status: str = "complete"
    created_unix: float = field(default_factory=time.time)
    environment: dict[str, Any] = field(default_factory=dict)
    loader: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    util: Optional[dict[str, Any]] = None
    worker_load_ns: Optional[list[int]] = None
    """Per-batch production times measured inside worker processes (None: not measured)."""
    h2d_ns: Optional[list[Optional[int]]] = None
    """Host-to-device copy time (GPU) in each step, from CUDA events (None: not measured,
    e.g. on CPU; a None entry: a step of an epoch without copy timing)."""

    def __post_init__(self) -> None:
        n = len(self.step_ns)
        if not self.samples:
            self.samples = [None] * n
        if not self.epoch:
            self.epoch = [0] * n
        if not self.complete:
            self.complete = [True] * n

    # -- derived -----------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        return len(self.step_ns)

    def steady_indices(self) -> list[int]:
        """Steps used for statistics: past the first ``warmup_steps`` of each epoch, and complete."""
        return self._steady().tolist()

    def _steady(self) -> np.ndarray:
        # vectorised: a million-step run is read in milliseconds, not seconds
        n = len(self.epoch)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        e = np.asarray(self.epoch)
        idx = np.arange(n)
        if n > 1 and np.any(e[1:] < e[:-1]):  # epochs out of order (an edited log)
            order = np.argsort(e, kind="stable")
            pos = np.empty(n, dtype=np.int64)
            se = e[order]
            first = np.maximum.accumulate(np.where(np.r_[True, se[1:] != se[:-1]], idx, 0))
            pos[order] = idx - first
        else:
            first = np.maximum.accumulate(np.where(np.r_[True, e[1:] != e[:-1]], idx, 0))
            pos = idx - first
        # an epoch's first step carries its start-up (iter(), worker spawn, the first
        # fetch): reported apart (startup_s), never in the steady statistics
        keep = (pos >= max(self.warmup_steps, 1)) & np.asarray(self.complete, dtype=bool)
        return idx[keep]

    def startup_s(self) -> Optional[float]:
        """Time from ``iter()`` to the first batch of the first epoch (worker spawn, first
        fetch; for a replay, setting up the epoch), seconds; None without a step."""
        if not self.epochs or not self.step_ns:
            return None
        first = self.epochs[0]
        if first.get("startup_ns") is not None:
            return float(first["startup_ns"]) / 1e9
        wait = self.wait_ns[0] if self.wait_ns else 0
        return float((first.get("setup_ns") or 0) + wait) / 1e9

    def steady_step_s(self) -> list[float]:
        return (np.asarray(self.step_ns, dtype=float)[self._steady()] / 1e9).tolist()

    def steady_h2d_s(self) -> Optional[list[float]]:
        """Host-to-device copy time of the steady steps (None: not measured)."""
        if self.h2d_ns is None:
            return None
        vals = [self.h2d_ns[i] for i in self.steady_indices()]
        return [v / 1e9 for v in vals if v is not None]

    def steady_wait_s(self) -> Optional[list[float]]:
        if self.wait_ns is None:
            return None
        return (np.asarray(self.wait_ns, dtype=float)[self._steady()] / 1e9).tolist()

    def steps_per_epoch(self) -> Optional[int]:
        """Length of an epoch: the loader's ``len()`` if known, else the longest epoch seen."""
        n = self.loader.get("len") if self.loader else None
        if isinstance(n, int) and n > 0:
            return n
        counts: dict[int, int] = {}
        for e in self.epoch:
            counts[e] = counts.get(e, 0) + 1
        return max(counts.values()) if counts else None

    def mean_gpu_util_pct(self) -> Optional[float]:
        """Mean GPU utilisation over the run and all visible GPUs; None without readings."""
        gpu = (self.util or {}).get("gpu") or {}
        series = gpu.get("util_pct")
        if not series:
            return None
        vals = [v for s in series for v in s if v is not None]
        return sum(vals) / len(vals) if vals else None

    def mean_cpu_pct(self, which: str = "process_pct") -> Optional[float]:
        """Mean CPU % (100 = one core) of this process (``process_pct``) or its loader
        workers (``workers_pct``); None with fewer than two readings (a run too short to
        sample: one rate over a few milliseconds says nothing)."""
        cpu = (self.util or {}).get("cpu") or {}
        vals = [v for v in (cpu.get(which) or []) if v is not None]
        return sum(vals) / len(vals) if len(vals) >= 2 else None

    def cpu_text(self) -> str:
        """CPU use in words: "process 95%, workers 180% (100% = one core)", "too short to
        sample", or "not sampled"."""
        if not (self.util or {}).get("cpu", {}).get("process_pct"):
            return "not sampled"
        proc, workers = self.mean_cpu_pct("process_pct"), self.mean_cpu_pct("workers_pct")
        if proc is None:
            interval = (self.util or {}).get("interval_s") or 0.1
            return f"too short to sample (under {2 * interval:g} s of sampling)"
        w = f", workers {workers:.0f}%" if workers else ""
        return f"process {proc:.0f}%{w} (100% = one core)"

    def gpu_util_per_tick(self) -> Optional[list[Optional[float]]]:
        """Mean GPU utilisation over the visible GPUs at each sampler tick (None: no GPU
        readings; a None entry: no GPU answered at that tick)."""
        gpu = (self.util or {}).get("gpu") or {}
        series = gpu.get("util_pct")
        return gpu_mean_per_tick(series) if series else None

    def summary(self) -> dict[str, Any]:
        """Statistics over the steady steps (seconds) plus counts."""
        idx = self.steady_indices()
        d = describe_steady([self])
        wait_share = None
        if self.wait_ns is not None and d["total_s"]:
            wait_share = sum(self.wait_ns[i] for i in idx) / 1e9 / d["total_s"]
        total_ns = sum(self.step_ns)
        return {
            "steps": self.n_steps,
            "steady_steps": len(idx),
            "warmup_steps": self.warmup_steps,
            "startup_s": self.startup_s(),
            "total_s": total_ns / 1e9,
            "step": d,
            "wait_share": wait_share,
            "mean_gpu_util_pct": self.mean_gpu_util_pct(),
            "mean_process_cpu_pct": self.mean_cpu_pct("process_pct"),
            "mean_workers_cpu_pct": self.mean_cpu_pct("workers_pct"),
        }

    # -- JSON (see ._runlog) -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The run log document (JSON-ready)."""
        from ._runlog import run_to_dict

        return run_to_dict(self)

    def save(self, path: PathLike) -> str:
        """Write the run log as JSON (atomically: a crash never leaves half a file).
        Returns the path."""
        from ._runlog import save_run

        return save_run(self, path)

    @classmethod
    def from_dict(cls, doc: Any, source: str = "the run log") -> Run:
        """Build a Run from a parsed run log, refusing foreign or newer ones
        (:class:`RunLogError`)."""
        from ._runlog import run_from_dict

        return run_from_dict(doc, source, cls)


def describe_steady(runs: Iterable[Run]) -> dict[str, Any]:
    """:func:`describe` over the steady steps of ``runs``, pooled (step times in seconds,
    with their sample counts for the throughput)."""
    steps: list[float] = []
    samples: list[Optional[int]] = []
    for run in runs:
        idx = run.steady_indices()
        steps += run.steady_step_s()
        samples += [run.samples[i] for i in idx]
    return describe(steps, samples)


def build_run(
    epochs: Sequence[EpochRecord],
    *,
    mode: str,
    measure_wait: bool,
    t0_ns: int,
    now_ns: int,
    warmup_steps: int,
    label: str,
    loader: dict[str, Any],
    settings: dict[str, Any],
    environment: dict[str, Any],
    samples_per_batch: Optional[int],
    short_last_batch: bool,
    auto_stop: bool,
    util: Optional[dict[str, Any]] = None,
    worker_load_ns: Optional[list[int]] = None,
    first_epoch: int = 0,
) -> Run:
    """A :class:`Run` from an evaluator's epoch stamps (an epoch still running is read as a
    snapshot at ``now_ns``). Step starts are made relative to ``t0_ns``; ``epochs`` are
    numbered from ``first_epoch`` (a part of a run, for the metrics journal)."""
    start: list[int] = []
    wait: Optional[list[int]] = [] if measure_wait else None
    step: list[int] = []
    epoch: list[int] = []
    complete: list[bool] = []
    h2d: list[Optional[int]] = []
    summaries = []
    for e, rec in enumerate(epochs, start=first_epoch):
        s = epoch_steps(rec, measure_wait=measure_wait, now=now_ns)
        start += [x - t0_ns for x in s.start_ns]
        step += s.step_ns
        if wait is not None and s.wait_ns is not None:
            wait += s.wait_ns
        epoch += [e] * len(s.step_ns)
        complete += s.complete
        copies = rec.copies or []
        h2d += [copies[k] if k < len(copies) else None for k in range(len(s.step_ns))]
        summaries.append(
            {
                "status": rec.status,
                "steps": len(s.step_ns),
                "setup_ns": rec.setup_ns,
                "startup_ns": (rec.setup_ns or 0) + (s.wait_ns[0] if s.wait_ns else 0)
                if s.step_ns
                else None,
                "sync_ns": rec.sync_ns,
                **({"auto_stop": rec.auto_reason} if auto_stop else {}),
            }
        )
    statuses = [e["status"] for e in summaries]
    status = next((s for s in ("running", "source-error", "stopped") if s in statuses), "complete")
    if not summaries:
        status = "not-started"
    return Run(
        mode=mode,
        start_ns=start,
        step_ns=step,
        wait_ns=wait,
        samples=_samples(epoch, loader, samples_per_batch, short_last_batch),
        epoch=epoch,
        complete=complete,
        warmup_steps=warmup_steps,
        label=label,
        status=status,
        environment=environment,
        loader=dict(loader),
        settings=settings,
        epochs=summaries,
        util=util,
        worker_load_ns=worker_load_ns,
        h2d_ns=h2d if any(x is not None for x in h2d) else None,
    )


def _samples(
    epoch: list[int], info: dict[str, Any], per: Optional[int], short_last_batch: bool
) -> list[Optional[int]]:
    """Samples per step: the first batch's leading dimension (else ``batch_size``), with
    the short last batch of a full DataLoader epoch (``len(dataset) % batch_size``)."""
    bs, n_ds, n_len = info.get("batch_size"), info.get("dataset_len"), info.get("len")
    if per is None:
        per = bs if isinstance(bs, int) else None
    out: list[Optional[int]] = [per] * len(epoch)
    if (
        short_last_batch
        and isinstance(bs, int)
        and isinstance(n_ds, int)
        and isinstance(n_len, int)
        and not info.get("drop_last")
        and n_ds % bs
    ):
        # the last step of every epoch that ran to the loader's end is short
        counts: dict[int, int] = {}
        for e in epoch:
            counts[e] = counts.get(e, 0) + 1
        for i in range(len(epoch)):
            last_of_epoch = i + 1 == len(epoch) or epoch[i + 1] != epoch[i]
            if last_of_epoch and counts[epoch[i]] == n_len:
                out[i] = n_ds % bs
    return out
