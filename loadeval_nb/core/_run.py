"""Run logs: one JSON document per run, versioned, never pickled.

Layout (``schema_version`` 1)::

    {
      "kind": "loadeval_nb.run", "schema_version": 1,
      "mode": "log" | "replay", "label": str | null, "status": str, "created_unix": float,
      "environment": {...},             # versions, devices (see _env.environment)
      "loader": {...},                  # batch_size, num_workers, pin_memory, ...
      "settings": {...},                # warmup_steps, max_steps, cache_on, cache_bytes, ...
      "steps": {                        # one entry per step, all runs' epochs in order
        "start_ns": [...],              # since the run began (same clock as "util")
        "wait_ns": [...] | null,        # time inside next() (null: replay, not measured)
        "step_ns": [...],               # next() to next(): the whole step
        "samples": [...],               # samples in the batch (null entries if unknown)
        "epoch": [...], "complete": [...]
      },
      "epochs": [{"status", "steps", "setup_ns", "sync_ns"}, ...],
      "util": {"interval_s", "t_ns", "gpu": {...}, "cpu": {...}} | null,
      "worker_load_ns": [...] | null,   # per-batch time inside worker processes (optional)
      "summary": {...}                  # derived; recomputed on load, kept for readers
    }

The schema version is separate from the package version: it changes only when
the layout does. A reader refuses a newer version with a message saying to
upgrade, and refuses any JSON that is not a loadeval_nb run log.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ._errors import RunLogError
from ._stats import describe

__all__ = ["Run", "load_run", "SCHEMA_VERSION", "RUN_KIND"]

SCHEMA_VERSION = 1
RUN_KIND = "loadeval_nb.run"

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
        out = []
        seen: dict[int, int] = {}
        for i, (e, ok) in enumerate(zip(self.epoch, self.complete)):
            k = seen.get(e, 0)
            seen[e] = k + 1
            if k >= self.warmup_steps and ok:
                out.append(i)
        return out

    def steady_step_s(self) -> list[float]:
        return [self.step_ns[i] / 1e9 for i in self.steady_indices()]

    def steady_wait_s(self) -> Optional[list[float]]:
        if self.wait_ns is None:
            return None
        return [self.wait_ns[i] / 1e9 for i in self.steady_indices()]

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
        cpu = (self.util or {}).get("cpu") or {}
        vals = [v for v in (cpu.get(which) or []) if v is not None]
        return sum(vals) / len(vals) if vals else None

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
            "total_s": total_ns / 1e9,
            "step": d,
            "wait_share": wait_share,
            "mean_gpu_util_pct": self.mean_gpu_util_pct(),
            "mean_process_cpu_pct": self.mean_cpu_pct("process_pct"),
            "mean_workers_cpu_pct": self.mean_cpu_pct("workers_pct"),
        }

    # -- JSON --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": RUN_KIND,
            "schema_version": SCHEMA_VERSION,
            "mode": self.mode,
            "label": self.label,
            "status": self.status,
            "created_unix": self.created_unix,
            "environment": self.environment,
            "loader": self.loader,
            "settings": {**self.settings, "warmup_steps": self.warmup_steps},
            "steps": {
                "start_ns": self.start_ns,
                "wait_ns": self.wait_ns,
                "step_ns": self.step_ns,
                "samples": self.samples,
                "epoch": self.epoch,
                "complete": self.complete,
            },
            "epochs": self.epochs,
            "util": self.util,
            "worker_load_ns": self.worker_load_ns,
            "summary": self.summary(),
        }

    def save(self, path: PathLike) -> str:
        """Write the run as JSON (atomically: a crash never leaves half a file). Returns the path."""
        path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, separators=(",", ":"), allow_nan=False)
        os.replace(tmp, path)
        return path

    @classmethod
    def from_dict(cls, doc: Any, source: str = "the run log") -> Run:
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
            step_ns = [int(x) for x in steps["step_ns"]]
            n = len(step_ns)
            start_ns = [int(x) for x in steps["start_ns"]]
            wait = steps.get("wait_ns")
            wait_ns = [int(x) for x in wait] if wait is not None else None
            samples = [None if x is None else int(x) for x in steps.get("samples") or [None] * n]
            epoch = [int(x) for x in steps.get("epoch") or [0] * n]
            complete = [bool(x) for x in steps.get("complete") or [True] * n]
            for name, arr in (
                ("start_ns", start_ns),
                ("samples", samples),
                ("epoch", epoch),
                ("complete", complete),
                ("wait_ns", wait_ns),
            ):
                if arr is not None and len(arr) != n:
                    raise ValueError(
                        f"steps.{name} has {len(arr)} entries but steps.step_ns has {n}"
                    )
            settings = dict(doc.get("settings") or {})
            return cls(
                mode=str(doc["mode"]),
                start_ns=start_ns,
                step_ns=step_ns,
                wait_ns=wait_ns,
                samples=samples,
                epoch=epoch,
                complete=complete,
                warmup_steps=int(settings.get("warmup_steps", 0)),
                label=doc.get("label"),
                status=str(doc.get("status", "complete")),
                created_unix=float(doc.get("created_unix", 0.0)),
                environment=dict(doc.get("environment") or {}),
                loader=dict(doc.get("loader") or {}),
                settings=settings,
                epochs=list(doc.get("epochs") or []),
                util=doc.get("util"),
                worker_load_ns=(
                    [int(x) for x in doc["worker_load_ns"]]
                    if doc.get("worker_load_ns") is not None
                    else None
                ),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise RunLogError(
                f"{source} is a damaged run log ({e}); record the run again."
            ) from None


def describe_steady(runs: Iterable[Run]) -> dict[str, Any]:
    """:func:`describe` over the steady steps of ``runs``, pooled (step times in seconds,
    with their sample counts for the throughput)."""
    steps: list[float] = []
    samples: list[Optional[int]] = []
    for run in runs:
        idx = run.steady_indices()
        steps += [run.step_ns[i] / 1e9 for i in idx]
        samples += [run.samples[i] for i in idx]
    return describe(steps, samples)


def load_run(path: PathLike) -> Run:
    """Read a run log written by :meth:`Run.save` / ``LoaderEvaluator.save_metrics``.

    Raises :class:`RunLogError` (a ``ValueError``) with one sentence for a missing,
    corrupt, foreign or too-new file.
    """
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise RunLogError(f"No run log at {p!r}; check the path or record the run first.") from None
    except IsADirectoryError:
        raise RunLogError(f"{p!r} is a directory; pass the path of a .json run log.") from None
    except UnicodeDecodeError:
        raise RunLogError(
            f"{p!r} is not a text file; pass a .json run log written by loadeval_nb."
        ) from None
    except json.JSONDecodeError as e:
        raise RunLogError(
            f"{p!r} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
            "it may be truncated: record the run again."
        ) from None
    return Run.from_dict(doc, source=repr(p))
