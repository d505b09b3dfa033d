"""What other loader settings would buy: the simulator fed from a measured pair.

Inputs: per-batch production times measured inside the worker processes
(``Run.worker_load_ns``, log mode with ``num_workers > 0``), or, with
``num_workers=0``, the real run's waits (the main process loads the batch inside
``next()``); and the ideal run's step times (the loop's own cost per step).
Whether more workers crowd each other on the cores is judged from the workers'
CPU readings: loads that mostly wait (I/O, sleeps) are simulated without contention.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from ..errors import LoadEvalError
from ..record.run import Run
from .predict import Prediction, predict

MIN_LOAD_SAMPLES = 8
"""Fewer measured batch productions than this: no prediction."""
MIN_FREE_CORES = 0.5
"""Fewer cores than this left to workers by the loop and other processes during the real
run: no prediction (the machine was too busy to say what more workers would get)."""


def load_times_s(real: Run) -> Optional[list[float]]:
    """Per-batch production times (s) of the real run, past its first batches (start-up)."""
    nw = real.loader_settings.get("num_workers") if real.loader_settings else None
    if real.worker_load_ns:
        # the first batch of each worker pays its start-up (imports, first file opens)
        skip = max(int(nw or 0), 1)
        xs = real.worker_load_ns[skip:] if len(real.worker_load_ns) > 2 * skip else []
        return [x / 1e9 for x in xs] or None
    if nw == 0:
        waits = real.steady_wait_s()
        return list(waits) if waits else None
    return None


def load_cpu_share(real: Run, loads_s: list[float]) -> Optional[float]:
    """How much of a batch's production time is CPU time (1.0: all of it), from the worker
    processes' CPU readings; None when unknown. Loads that wait (sleep, network, disk)
    do not crowd each other on the cores; CPU-bound ones do."""
    nw = real.loader_settings.get("num_workers") if real.loader_settings else None
    if not loads_s or not isinstance(nw, int):
        return None
    duration_s = sum(real.step_ns) / 1e9
    if nw == 0:  # the main process loads and steps: its CPU share over the run
        proc = real.mean_cpu_pct("process_pct")
        return proc / 100 if proc is not None else None
    cpu_pct = real.mean_cpu_pct("workers_pct")
    if cpu_pct is None or duration_s <= 0:
        return None
    busy_s = sum(loads_s) * len(real.worker_load_ns or loads_s) / len(loads_s)
    return (cpu_pct / 100 * duration_s) / busy_s if busy_s > 0 else None


def handoff_s(real: Run, loads_s: list[float]) -> float:
    """The main process's cost of taking a batch from a worker: the shortest waits, when
    some batches were ready ahead of time (the 10th percentile is then a ready batch's
    hand-over). In a loop where every batch is waited for, the waits are load time, not
    hand-over: 0 (unknown) then."""
    waits = sorted(real.steady_wait_s() or [])
    if len(waits) < 10 or not loads_s:
        return 0.0
    p10 = waits[len(waits) // 10]
    median_load = sorted(loads_s)[len(loads_s) // 2]
    return p10 if p10 < 0.25 * median_load else 0.0


def predict_from_runs(real: Run, ideal: Run, **kw: Any) -> Optional[Prediction]:
    """A :class:`Prediction` for other ``num_workers`` / ``prefetch_factor``, or None
    when the pair lacks what the simulator needs (too few worker timings, not a
    DataLoader, no ideal steps)."""
    loads = load_times_s(real)
    steps = ideal.steady_step_s()
    nw = real.loader_settings.get("num_workers") if real.loader_settings else None
    if not loads or len(loads) < MIN_LOAD_SAMPLES or len(steps) < MIN_LOAD_SAMPLES:
        return None
    if not isinstance(nw, int):
        return None
    pf = real.loader_settings.get("prefetch_factor") or 2
    if nw and "handoff_s" not in kw:
        kw["handoff_s"] = handoff_s(real, loads)
    if "reserve_cores" not in kw:
        # the loop's own CPU use (torch threads, Python): the cores workers cannot have
        proc = ideal.mean_cpu_pct("process_pct")
        if proc is not None:
            kw["reserve_cores"] = max(1.0, proc / 100)
        # and the cores other processes took while the real run ran: a busy machine's
        # workers get what is left of it, not the whole machine
        other = real.mean_cpu_pct("other_pct")
        if other is not None and other >= 50:
            cores = kw.get("cores") or real.environment.get("cpu_count") or os.cpu_count() or 1
            free = cores - kw.get("reserve_cores", 1.0) - other / 100
            if free < MIN_FREE_CORES:
                raise LoadEvalError(
                    f"other processes took {other / 100:.1f} of the machine's {cores} cores "
                    "during the real run, so too little was free to predict what more "
                    "workers would get; rerun when the machine is quieter"
                )
            kw["reserve_cores"] = kw.get("reserve_cores", 1.0) + other / 100
    if "contention" not in kw:
        share = load_cpu_share(real, loads)
        kw["contention"] = share is None or share >= 0.5
    return predict(loads, steps, num_workers=nw, prefetch_factor=pf, **kw)
