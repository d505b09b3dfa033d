"""One measured run: raw per-step arrays plus context, and the statistics derived from them.

A :class:`Run` is built from an evaluator's epoch stamps by
:func:`~..measure.build_run.build_run` and written and read as a run log by :mod:`.runlog`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from .._files import atomic_open, expand_path
from .._stats import describe
from ..errors import RunLogError

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
    block: list[int] = field(default_factory=list)
    """The block each step belongs to (0, 1, ...). A block is a stretch of consecutive
    steps measured as one: a block of an interleaved pair, one repeat of a sequential
    pair, one of a rung's two blocks, or one epoch of a run :class:`LoaderEvaluator`
    measured (there, and only there, a block is an epoch of the loader)."""
    complete: list[bool] = field(default_factory=list)
    warmup: int = 0
    """Steps at the start of each epoch left out of the statistics (the log's
    ``settings.warmup``)."""
    label: Optional[str] = None
    status: str = "complete"
    created_unix: float = field(default_factory=time.time)
    environment: dict[str, Any] = field(default_factory=dict)
    loader_settings: dict[str, Any] = field(default_factory=dict)
    """The loader's settings (batch_size, num_workers, ...): the run log's ``loader``."""
    settings: dict[str, Any] = field(default_factory=dict)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    """One summary per block: its ``status``, ``steps``, ``setup_ns``, ``startup_ns`` and
    ``sync_ns``, the steps it leaves out at its start (``warmup``), why it stopped
    (``auto_stop``)."""
    util: Optional[dict[str, Any]] = None
    worker_load_ns: Optional[list[int]] = None
    """Per-batch production times measured inside worker processes (None: not measured)."""
    h2d_ns: Optional[list[Optional[int]]] = None
    """Host-to-device copy time (GPU) in each step, from CUDA events (None: not measured,
    e.g. on CPU; a None entry: a step of an epoch without copy timing)."""
    worker_resource: Optional[dict[str, Any]] = None
    """What the loader's workers spent their time on, from the operating system (the
    run log's optional ``worker_resource``: measure.resource's ``WorkerResource.to_dict()``;
    None: no workers, not read, or a log written before it)."""

    def __post_init__(self) -> None:
        n = len(self.step_ns)
        if not self.samples:
            self.samples = [None] * n
        if not self.block:
            self.block = [0] * n
        if not self.complete:
            self.complete = [True] * n

    # -- derived -----------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        return len(self.step_ns)

    def steady_indices(self) -> list[int]:
        """Steps used for statistics: past the first ``warmup`` of each block, and complete."""
        return self._steady().tolist()

    def _steady(self) -> np.ndarray:
        # vectorised: a million-step run is read in milliseconds, not seconds
        n = len(self.block)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        e = np.asarray(self.block)
        idx = np.arange(n)
        if n > 1 and np.any(e[1:] < e[:-1]):  # blocks out of order (an edited log)
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
        skip = np.full(n, max(self.warmup, 1), dtype=np.int64)
        own = {
            k: int(ep["warmup"])
            for k, ep in enumerate(self.blocks or [])
            if isinstance(ep, dict) and isinstance(ep.get("warmup"), int) and ep["warmup"] >= 0
        }
        if own:  # a block of an interleaved pair says itself what to leave out
            skip = np.array([own.get(int(x), s) for x, s in zip(e, skip)], dtype=np.int64)
        keep = (pos >= skip) & np.asarray(self.complete, dtype=bool)
        return idx[keep]

    def steady_by_block(self) -> dict[int, list[float]]:
        """The steady step times (seconds) of each block that has any, by block: the blocks
        of an interleaved pair, the repeats of a pair, the two blocks of a rung, the epochs
        of a :class:`LoaderEvaluator` run."""
        out: dict[int, list[float]] = {}
        for k in self.steady_indices():
            out.setdefault(self.block[k], []).append(self.step_ns[k] / 1e9)
        return out

    def startup_s(self) -> Optional[float]:
        """Time from ``iter()`` to the first batch of the first epoch (worker spawn, first
        fetch; for a replay, setting up the epoch), seconds; None without a step."""
        if not self.blocks or not self.step_ns:
            return None
        first = self.blocks[0]
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

    @property
    def method(self) -> str:
        """How this run's pair was measured, the verdict's one place to read it:
        ``"blocks"`` (interleaved with the other side in one pass), ``"epochs"`` (the
        loop's own epochs, paired in A B B A order) or ``"runs"`` (a run of its own: one
        side after the other, or a run alone). The log's ``settings.method``; in a log
        written before it, the plan kept there says it."""
        settings = self.settings or {}
        said = settings.get("method")
        if said in METHODS:
            return str(said)
        if isinstance(settings.get("interleaved"), dict):
            return "blocks"
        if isinstance(settings.get(EPOCH_PAIR), dict):
            return "epochs"
        return "runs"

    @property
    def plan(self) -> Optional[dict[str, Any]]:
        """An interleaved pass's plan as its log keeps it (``settings.interleaved``: its
        blocks, their steps, the epoch); None for another method."""
        plan = (self.settings or {}).get("interleaved")
        return plan if isinstance(plan, dict) else None

    def steps_per_epoch(self) -> Optional[int]:
        """Length of an epoch: the batches the loader held where a pass drew them all, else
        its ``len()`` if known, else the longest epoch seen (an interleaved pass's blocks
        are no epochs: None there)."""
        plan = self.plan
        if plan is not None:
            seen = plan.get("epoch_seen")
            if isinstance(seen, int) and not isinstance(seen, bool) and seen > 0:
                return seen
        n = self.loader_settings.get("len") if self.loader_settings else None
        if isinstance(n, int) and n > 0:
            return n
        if plan is not None:
            return None
        counts: dict[int, int] = {}
        for e in self.block:
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
            "warmup_steps": self.warmup,
            "startup_s": self.startup_s(),
            "total_s": total_ns / 1e9,
            "step": d,
            "wait_share": wait_share,
            "mean_gpu_util_pct": self.mean_gpu_util_pct(),
            "mean_process_cpu_pct": self.mean_cpu_pct("process_pct"),
            "mean_workers_cpu_pct": self.mean_cpu_pct("workers_pct"),
        }

    # -- its file (the layout: record/runlog.py's docstring) ---------------------------
    def to_dict(self) -> dict[str, Any]:
        """The run log document (JSON-ready)."""
        return run_to_dict(self)

    def save(self, path: PathLike) -> str:
        """Write the run log as JSON (atomically: a crash never leaves half a file).
        Returns the path."""
        return save_run(self, path)

    @classmethod
    def from_dict(cls, doc: Any, source: str = "the run log") -> Run:
        """Build a Run from a parsed run log, refusing foreign or newer ones
        (:class:`RunLogError`)."""
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


def gpu_mean_per_tick(per_device: Sequence[Sequence[Optional[float]]]) -> list[Optional[float]]:
    """Per sampler tick, the mean utilisation over the GPUs that answered (None where none did)."""
    out: list[Optional[float]] = []
    for vals in zip(*per_device):
        got = [v for v in vals if v is not None]
        out.append(sum(got) / len(got) if got else None)
    return out


def dali_metrics(run: Run) -> dict[str, Any]:
    """DALI's metrics of ``run``: ``total_batches``, ``total_time`` (all steps, seconds),
    ``avg/min/max_batch_time`` and ``batch_times`` (the wait inside ``next()`` per batch;
    zeros in replay, where a cache lookup costs nanoseconds and is not timed)."""
    n = run.n_steps
    waits = [w / 1e9 for w in run.wait_ns] if run.wait_ns is not None else [0.0] * n
    return {
        "mode": run.mode,
        "total_batches": n,
        "total_time": sum(run.step_ns) / 1e9,
        "avg_batch_time": sum(waits) / n if n else None,
        "min_batch_time": min(waits) if n else None,
        "max_batch_time": max(waits) if n else None,
        "batch_times": waits,
    }


def step_metrics(run: Run, warmup: int) -> dict[str, Any]:
    """:func:`dali_metrics` and the step statistics every wrapper's ``get_metrics`` adds:
    ``step_times`` (the whole step, ``next()`` to ``next()``), ``steady_steps``,
    ``warmup_steps``, ``avg/median/p90_step_time``, ``samples_per_s``, ``wait_share`` and
    ``status``."""
    summ = run.summary()
    st = summ["step"]
    return {
        **dali_metrics(run),
        "step_times": [s / 1e9 for s in run.step_ns],
        "steady_steps": summ["steady_steps"],
        "warmup_steps": warmup,
        "avg_step_time": st["mean_s"],
        "median_step_time": st["median_s"],
        "p90_step_time": st["p90_s"],
        "samples_per_s": st["samples_per_s"],
        "wait_share": summ["wait_share"],
        "status": run.status,
    }


SIDES = ("real", "ideal")
"""The two sides of a pair, in the order every front end shows them."""

SCHEMA_VERSION = 4
"""4: ``steps.block`` and ``blocks`` (3 said ``steps.epoch`` and ``epochs``); 3:
``settings.steps``, ``settings.warmup`` and ``loader_settings`` (2 said ``max_steps``,
``warmup_steps`` and ``loader``). Every older key is still read."""
METHODS = ("blocks", "epochs", "runs")
"""How a pair is measured (a run log's ``settings.method``; :attr:`Run.method`)."""
EPOCH_PAIR = "epoch_pair"
"""The key of a run log's ``settings`` that says its blocks are the loop's own epochs,
paired with the other side's in A B B A order (``{"epochs": 8, "order": "ABBA"}``)."""
CONTENDED = "contended"
"""The contended arm (cached batches served while the real loader keeps producing, its
batches dropped: the ideal with the loader's CPU use still on the machine): its name
among a pass's arms."""
VARIANT = "variant"
"""The variant arm (the loader rebuilt with other settings, served in the same pass): its
name among a pass's arms, and the key of its run log's ``settings`` that holds what it
changed (``{"num_workers": 4}``)."""
DEFAULT_STEPS = 200
"""The steps a side a run takes by default (``RunSettings.steps``): a pair on the loop's
epochs takes 8 epochs then, the pass no longer than a child per side took."""
OLD_SETTINGS = {"max_steps": "steps", "warmup_steps": "warmup"}
"""Schema 2's keys in ``settings`` and the words that replaced them."""
RUN_KIND = "loadeval_nb.run"


def run_to_dict(run: Run) -> dict[str, Any]:
    """The run log document of ``run``."""
    dali = dali_metrics(run)
    return {
        "kind": RUN_KIND,
        "schema_version": SCHEMA_VERSION,
        "mode": run.mode,
        "label": run.label,
        "status": run.status,
        "created_unix": run.created_unix,
        **{k: dali[k] for k in DALI_KEYS},
        "environment": run.environment,
        "loader_settings": run.loader_settings,
        "settings": {**run.settings, "warmup": run.warmup},
        "steps": {
            "start_ns": run.start_ns,
            "wait_ns": run.wait_ns,
            "step_ns": run.step_ns,
            "samples": run.samples,
            "block": run.block,
            "complete": run.complete,
            "h2d_ns": run.h2d_ns,
        },
        "blocks": run.blocks,
        "util": run.util,
        "worker_load_ns": run.worker_load_ns,
        **({"worker_resource": run.worker_resource} if run.worker_resource is not None else {}),
        "summary": run.summary(),
    }


DALI_KEYS = (
    "total_batches",
    "total_time",
    "avg_batch_time",
    "min_batch_time",
    "max_batch_time",
    "batch_times",
)
"""DALI's metric keys written at the top level ("mode" is already there)."""


def save_run(run: Run, path: PathLike) -> str:
    """Write ``run`` as JSON (atomically: a crash never leaves half a file). Returns the path."""
    with atomic_open(path) as f:
        json.dump(run_to_dict(run), f, separators=(",", ":"), allow_nan=False)
    return expand_path(path)


def run_from_dict(doc: Any, source: str = "the run log", cls: type[Run] = Run) -> Run:
    """Build a Run from a parsed document, refusing foreign or newer ones."""
    if not isinstance(doc, dict) or doc.get("kind") != RUN_KIND:
        raise RunLogError(
            f'{source} is not a loadeval_nb run log (it has no "kind": "{RUN_KIND}"); '
            "pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics()."
        )
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunLogError(
            f"{source} has no integer schema_version; write it again with save_metrics()."
        )
    if version > SCHEMA_VERSION:
        raise RunLogError(
            f"{source} uses run-log schema {version}, newer than the {SCHEMA_VERSION} this "
            "loadeval_nb reads; upgrade with `pip install -U loadeval-nb`."
        )
    try:
        steps = doc["steps"]
        if not isinstance(steps, dict):
            raise ValueError("it has no steps")
        step_ns = [int(x) for x in steps["step_ns"]]
        n = len(step_ns)
        start_ns = [int(x) for x in steps["start_ns"]]
        wait = steps.get("wait_ns")
        wait_ns = [int(x) for x in wait] if wait is not None else None
        samples = [None if x is None else int(x) for x in steps.get("samples") or [None] * n]
        block = [int(x) for x in steps.get("block", steps.get("epoch")) or [0] * n]
        complete = [bool(x) for x in steps.get("complete") or [True] * n]
        for name, arr in (
            ("start_ns", start_ns),
            ("samples", samples),
            ("block", block),
            ("complete", complete),
            ("wait_ns", wait_ns),
        ):
            if arr is not None and len(arr) != n:
                raise ValueError(f"steps.{name} has {len(arr)} entries but steps.step_ns has {n}")
        if any(x < 0 for x in step_ns) or (wait_ns is not None and any(x < 0 for x in wait_ns)):
            raise ValueError("it holds negative step or wait times")
        if any(
            x >= 2**63
            for xs in (step_ns, start_ns, wait_ns or [], [x for x in samples if x is not None])
            for x in xs
        ):
            raise ValueError("it holds numbers too large for a run (over 2**63)")
        if any(not isinstance(x, bool) for x in steps.get("complete") or []):
            raise ValueError(
                'steps.complete holds values that are not true or false ("false" is not)'
            )
        if doc["mode"] not in ("log", "replay"):
            raise ValueError(f"its mode is {doc['mode']!r}, not 'log' or 'replay'")
        settings = dict(doc.get("settings") or {})
        if version < 3:  # schema 2's words
            settings = {OLD_SETTINGS.get(k, k): v for k, v in settings.items()}
        warmup = int(settings.pop("warmup", 0) or 0)  # the Run's own field
        loads = doc.get("worker_load_ns")
        h2d = steps.get("h2d_ns")
        if h2d is not None and len(h2d) != n:
            raise ValueError(f"steps.h2d_ns has {len(h2d)} entries but steps.step_ns has {n}")
        return cls(
            mode=str(doc["mode"]),
            start_ns=start_ns,
            step_ns=step_ns,
            wait_ns=wait_ns,
            samples=samples,
            block=block,
            complete=complete,
            warmup=warmup,
            label=doc.get("label"),
            status=str(doc.get("status", "complete")),
            created_unix=float(doc.get("created_unix", 0.0)),
            environment=dict(doc.get("environment") or {}),
            loader_settings=dict(doc.get("loader_settings", doc.get("loader")) or {}),
            settings=settings,
            blocks=list(doc.get("blocks", doc.get("epochs")) or []),
            util=doc.get("util"),
            worker_load_ns=[int(x) for x in loads] if loads is not None else None,
            h2d_ns=[None if x is None else int(x) for x in h2d] if h2d is not None else None,
            worker_resource=_optional_dict(doc.get("worker_resource")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RunLogError(f"{source} is a damaged run log ({e}); record the run again.") from None


def _optional_dict(v: Any) -> Optional[dict[str, Any]]:
    """An optional part of a run log added within a schema version (older logs lack it;
    anything but an object is left out rather than refused)."""
    return dict(v) if isinstance(v, dict) else None
