"""Run logs: one JSON document per run, versioned, never pickled.

Layout (``schema_version`` 2)::

    {
      "kind": "loadeval_nb.run", "schema_version": 2,
      "mode": "log" | "replay", "label": str | null, "status": str, "created_unix": float,
      "total_batches": int, "total_time": float,        # DALI's metric keys (seconds),
      "avg_batch_time": float | null, "min_batch_time": float | null,
      "max_batch_time": float | null, "batch_times": [...],   # derived, as get_metrics()
      "environment": {...},             # versions, devices (see _env.environment)
      "loader": {...},                  # batch_size, num_workers, pin_memory, ...
      "settings": {...},                # warmup_steps, max_steps, cache_on, cache_bytes, ...
      "steps": {                        # one entry per step, all runs' epochs in order
        "start_ns": [...],              # since the run began (same clock as "util")
        "wait_ns": [...] | null,        # time inside next() (null: replay, not measured)
        "step_ns": [...],               # next() to next(): the whole step
        "samples": [...],               # samples in the batch (null entries if unknown)
        "epoch": [...], "complete": [...],
        "h2d_ns": [...] | null          # host-to-device copy time per step (CUDA events;
      },                                # null: not measured, e.g. on CPU)
      "epochs": [{"status", "steps", "setup_ns", "sync_ns"}, ...],
      "util": {"interval_s", "t_ns", "gpu": {...}, "cpu": {...}} | null,
      "worker_load_ns": [...] | null,   # per-batch time inside worker processes (optional)
      "summary": {...}                  # derived; recomputed on load, kept for readers
    }

Schema 2 added DALI's metric keys at the top level, so a file written by
``save_metrics`` reads like one written by DALI's ``LoaderEvaluator``
(``json.load(f)["total_batches"]``); schema 1 files (without them) are read too.
Everything derived is recomputed from ``steps`` on load, never trusted from disk.

The schema version is separate from the package version: it changes only when
the layout does. A reader refuses a newer version with a message saying to
upgrade, and refuses any JSON that is not a loadeval_nb run log.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from ._dali import dali_metrics
from ._errors import LoadEvalError, RunLogError, a_kind
from ._files import atomic_open, cannot_write_in
from ._journal import read_journal
from ._run import PathLike, Run

SCHEMA_VERSION = 2
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
        "loader": run.loader,
        "settings": {**run.settings, "warmup_steps": run.warmup_steps},
        "steps": {
            "start_ns": run.start_ns,
            "wait_ns": run.wait_ns,
            "step_ns": run.step_ns,
            "samples": run.samples,
            "epoch": run.epoch,
            "complete": run.complete,
            "h2d_ns": run.h2d_ns,
        },
        "epochs": run.epochs,
        "util": run.util,
        "worker_load_ns": run.worker_load_ns,
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
    return os.fspath(path)


def check_metrics_file(path: Any) -> None:
    """One :class:`LoadEvalError` now for a run-log path that could not be written later:
    not a path, a directory, or in a folder that cannot be made or written to."""
    try:
        p = os.fspath(path)
    except TypeError:
        raise LoadEvalError(
            f"metrics_file must be a path such as 'run.json', not {a_kind(path)}."
        ) from None
    if os.path.isdir(p):
        raise LoadEvalError(
            f"metrics_file {p!r} is a directory; pass a file path such as 'run.json'."
        )
    reason = cannot_write_in(os.path.dirname(os.path.abspath(p)))
    if reason is not None:
        raise LoadEvalError(
            f"Cannot write metrics_file {p!r} ({reason}); pass a path in a folder you can write to."
        )


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
                raise ValueError(f"steps.{name} has {len(arr)} entries but steps.step_ns has {n}")
        if any(x < 0 for x in step_ns) or (wait_ns is not None and any(x < 0 for x in wait_ns)):
            raise ValueError("it holds negative step or wait times")
        if any(not isinstance(x, bool) for x in steps.get("complete") or []):
            raise ValueError(
                'steps.complete holds values that are not true or false ("false" is not)'
            )
        if doc["mode"] not in ("log", "replay"):
            raise ValueError(f"its mode is {doc['mode']!r}, not 'log' or 'replay'")
        settings = dict(doc.get("settings") or {})
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
            worker_load_ns=[int(x) for x in loads] if loads is not None else None,
            h2d_ns=[None if x is None else int(x) for x in h2d] if h2d is not None else None,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RunLogError(f"{source} is a damaged run log ({e}); record the run again.") from None


def load_run(path: PathLike) -> Run:
    """Read a run log written by :meth:`Run.save` / ``LoaderEvaluator.save_metrics``.

    Raises :class:`RunLogError` (a ``ValueError``) with one sentence for a missing,
    corrupt, foreign or too-new file.
    """
    p = os.fspath(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise RunLogError(f"No run log at {p!r}; check the path or record the run first.") from None
    except OSError as e:
        raise RunLogError(f"Cannot read {p!r} ({e.strerror}); check the path.") from None
    if stat.S_ISDIR(mode):
        raise RunLogError(f"{p!r} is a directory; pass the path of a .json run log.")
    if not stat.S_ISREG(mode):  # a pipe or a device would block or never end
        raise RunLogError(f"{p!r} is not a regular file; pass the path of a .json run log.")
    try:
        with open(p, encoding="utf-8-sig") as f:  # a byte-order mark is valid JSON text too
            doc = json.load(f)
    except UnicodeDecodeError:
        raise RunLogError(
            f"{p!r} is not a text file; pass a .json run log written by loadeval_nb."
        ) from None
    except json.JSONDecodeError as e:
        raise RunLogError(
            f"{p!r} is not valid JSON ({e.msg}: line {e.lineno}, column {e.colno}); "
            "it may be truncated: record the run again."
        ) from None
    except RecursionError:
        raise RunLogError(
            f"{p!r} is nested too deeply to be a run log; record the run again."
        ) from None
    except OSError as e:
        raise RunLogError(f"Cannot read {p!r} ({e.strerror}); check the path.") from None
    if isinstance(doc, dict) and doc.get("kind") == RUN_KIND:
        doc, _ = read_journal(doc, p)  # epochs appended while the run went on
    return run_from_dict(doc, source=repr(p))
