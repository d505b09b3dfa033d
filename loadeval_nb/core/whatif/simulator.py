"""What other ``num_workers`` / ``prefetch_factor`` settings would buy: a DataLoader model.

The model
---------
A discrete-event model of ``torch.utils.data.DataLoader`` with ``W`` worker
processes and ``prefetch_factor`` ``pf``, fed with two distributions measured on
the real workload: the time one worker takes to *produce* a batch (``load_s``,
e.g. from :class:`~loadeval_nb.core.measure.worker_timing.WorkerFetchTimer`) and the time
the training loop takes per step when it never waits for data (``step_s``, the
ideal run's step times). All times are seconds. Batch ``i`` (0-based):

* **Assignment.** Batch ``i`` goes to worker ``i % W`` (PyTorch's round robin),
  whose queue is first in, first out.
* **Prefetch bound.** At most ``P = pf × W`` batches are outstanding (sent to a
  worker and not yet handed to the loop). The first ``P`` are sent at ``t = 0``;
  after that, batch ``i`` is sent when batch ``i − P`` is handed to the loop
  (PyTorch sends the next index from ``_process_data``):
  ``sent_i = 0`` for ``i < P``, else ``got_{i−P}``.
* **Workers.** A worker starts batch ``i`` when it has it and is done with its
  previous one: ``ready_i = max(sent_i, ready_{i−W}) + load_i``.
* **In-order hand-over.** The loop asks for batch ``i`` at ``req_i`` and gets it
  at ``got_i = max(req_i, ready_i)``; its wait is ``got_i − req_i``. It asks for
  the next one after a step: ``req_{i+1} = got_i + step_i``, ``req_0 = 0``.
* **No workers** (``W = 0``): the loop loads the batch itself:
  ``got_i = req_i + load_i``.
* **Hand-over cost** (optional, ``handoff_s``, default 0): with workers, taking
  a finished batch off the result queue (unpickling, mapping shared memory, a
  wake-up) costs the main process ``h`` per batch even when the batch is ready:
  ``got_i = max(req_i, ready_i) + h``, counted as wait. Log mode sees it as the
  floor of the waits (their 10th percentile at a setting where most batches are
  ready).

Every quantity depends only on earlier batches, so one pass over the batches
computes it exactly (no event queue). Constant times give closed forms that the
tests check: ``W = 0`` steps take ``L + S``; input-bound (``L/W > S``) runs at
``W/L`` steps/s with one wait every ``W`` steps; compute-bound (``L/W < S``) at
``1/S`` with no waits.

Draws
-----
``load_s`` and ``step_s`` are either measured samples, resampled with
replacement (bootstrap) by a ``random.Random(seed)`` so results are
reproducible, or callables ``draw(rng) -> seconds``. Each setting sees the same
draws (common random numbers), so differences between settings are not noise.
Resampling independently drops any correlation between consecutive batches.

CPU contention (optional)
-------------------------
With ``cores`` given, the main process keeps ``reserve_cores`` of them busy
(default 1: a CPU training loop, or a GPU loop that launches kernels all the
time; 0 for a loop that mostly sleeps or waits) and the workers share the rest:
``usable = max(1, cores − reserve_cores)``. When ``W > usable``, every load time
is multiplied by ``W / usable`` (processor sharing with every worker busy, the
input-bound case where it matters; when workers idle, as in a compute-bound
loop, this overstates contention, but there it does not change the rate).
Load times are taken as measured without contention; if they were measured
with ``measured_workers`` workers on the same machine, the factor is relative:
``max(1, W/usable) / max(1, measured/usable)`` (``W = 0`` counts as 1: the main
process loads alone). Leave ``cores=None`` for loads
that do not use a CPU (sleeping, waiting on storage or the network).

Not modelled: worker start-up (left out by ``warmup``), the cost of sending a
batch from a worker to the main process (pickling, shared memory; it is outside
``load_s`` as measured inside the worker), ``pin_memory``'s thread, the main
process competing with the workers for cores beyond the one it keeps, and
``in_order=False``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from .._errors import a_kind, check_int, check_number
from ..errors import LoadEvalError

Draw = Union[Sequence[float], Callable[[random.Random], float]]
"""Measured samples (seconds) to bootstrap from, or ``draw(rng) -> seconds``."""

_STALL_FRACTION = 0.01
"""A step counts as a stall when its wait exceeds 1 % of the mean compute step."""


@dataclass(frozen=True)
class SimResult:
    """One simulated setting; rates over the steps after ``warmup``. Times in seconds."""

    num_workers: int
    prefetch_factor: Optional[int]
    """None when ``num_workers`` is 0 (PyTorch has no prefetching then)."""
    steps_per_s: float
    step_s: float
    """Mean step time, waits included (``1 / steps_per_s``)."""
    compute_s: float
    """Mean compute step (the drawn ``step_s``) over the same steps."""
    wait_share: float
    """Share of the time the loop waited for data, 0..1."""
    stall_share: float
    """Share of steps that waited more than 1 % of the mean compute step (beyond the
    hand-over cost), 0..1."""
    mean_wait_s: float
    load_scale: float
    """The contention factor applied to every load time (1.0 without ``cores``)."""
    n_steps: int
    wait_s: list[float] = field(default_factory=list, repr=False, compare=False)
    """Every simulated step's wait, in order (the steps after warmup); kept by
    :func:`simulate`, left empty in a :class:`Prediction`'s results."""


def usable_cores(cores: int, reserve_cores: float = 1.0) -> float:
    """Cores left to the workers beside the main process's ``reserve_cores``, at least 1."""
    return max(1.0, cores - reserve_cores)


def check_draw(name: str, draw: Any) -> Draw:
    if callable(draw):
        return draw  # type: ignore[no-any-return]
    if isinstance(draw, (int, float)) and not isinstance(draw, bool):
        draw = [draw]  # one time in seconds: every batch (or step) takes it
    try:
        values = [float(x) for x in draw]
    except (TypeError, ValueError):
        raise LoadEvalError(
            f"{name} must be a time in seconds, a list of them or a function rng -> seconds, "
            f"not {a_kind(draw)}."
        ) from None
    if not values:
        raise LoadEvalError(f"{name} is empty; pass at least one measured time in seconds.")
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise LoadEvalError(f"{name} must hold finite times >= 0 seconds; drop the bad samples.")
    return values


def _draws(draw: Draw, n: int, rng: random.Random, name: str) -> list[float]:
    if callable(draw):
        out = [float(draw(rng)) for _ in range(n)]
        if not all(math.isfinite(v) and v >= 0 for v in out):
            raise LoadEvalError(f"{name}(rng) must return finite times >= 0 seconds.")
        return out
    return rng.choices(draw, k=n)  # type: ignore[arg-type]


def load_scale(
    num_workers: int,
    cores: Optional[int],
    measured_workers: Optional[int],
    reserve_cores: float = 1.0,
) -> float:
    if cores is None:
        return 1.0
    usable = usable_cores(cores, reserve_cores)

    def crowding(w: int) -> float:  # no workers: the main process loads, alone
        return max(1.0, w / usable) if w > 0 else 1.0

    return crowding(num_workers) / crowding(measured_workers or 0)


def default_warmup(n_batches: int) -> int:
    return n_batches // 10


def run_model(
    loads: list[float],
    steps: list[float],
    num_workers: int,
    prefetch_factor: int,
    warmup: int,
    scale: float,
    handoff: float = 0.0,
    keep_waits: bool = True,
) -> SimResult:
    n = len(loads)
    W = num_workers
    waits = [0.0] * n
    got = [0.0] * n
    req = 0.0
    if scale != 1.0:
        loads = [x * scale for x in loads]
    if W == 0:
        for i in range(n):
            g = req + loads[i]
            got[i] = g
            req = g + steps[i]
        # loading happens inside the step, the loop "waits" for all of it
        waits = loads
    else:
        P = prefetch_factor * W
        free = [0.0] * W  # when each worker finished its latest batch
        for i in range(n):
            sent = got[i - P] if i >= P else 0.0
            w = i % W
            f = free[w]
            r = (sent if sent > f else f) + loads[i]
            free[w] = r
            if r > req:
                waits[i] = r - req + handoff
                req = r + handoff
            elif handoff:
                waits[i] = handoff
                req += handoff
            got[i] = req
            req += steps[i]
    start = got[warmup] - waits[warmup]  # req_warmup
    total = req - start
    m = n - warmup
    win_waits = waits[warmup:]
    compute = sum(steps[warmup:]) / m
    if total <= 0:
        raise LoadEvalError("load_s and step_s are all zero; pass measured times in seconds.")
    thr = _STALL_FRACTION * compute + (handoff if W else 0.0)
    return SimResult(
        num_workers=W,
        prefetch_factor=prefetch_factor if W else None,
        steps_per_s=m / total,
        step_s=total / m,
        compute_s=compute,
        wait_share=sum(win_waits) / total,
        stall_share=sum(1 for x in win_waits if x > thr) / m,
        mean_wait_s=sum(win_waits) / m,
        load_scale=scale,
        n_steps=m,
        wait_s=win_waits if keep_waits else [],
    )


def simulate(
    load_s: Draw,
    step_s: Draw,
    num_workers: int,
    prefetch_factor: Optional[int] = 2,
    *,
    n_batches: int = 4000,
    warmup: Optional[int] = None,
    seed: int = 0,
    cores: Optional[int] = None,
    measured_workers: Optional[int] = None,
    reserve_cores: float = 1.0,
    handoff_s: float = 0.0,
) -> SimResult:
    """Simulate ``n_batches`` steps of a loop fed by a DataLoader (see the module docstring).

    ``load_s``: per-batch production times of one worker; ``step_s``: compute step
    times with no waiting (seconds, lists to resample, or ``rng -> seconds``).
    ``prefetch_factor`` is ignored (may be None) when ``num_workers`` is 0. The
    first ``warmup`` steps (default ``n_batches // 10``) are left out of the rates.
    ``cores`` turns the CPU contention model on; ``measured_workers`` is the
    ``num_workers`` the load times were measured with; ``reserve_cores`` the cores
    the main process keeps busy; ``handoff_s`` the main process's cost of taking one
    batch from a worker.

    Raises :class:`LoadEvalError` for empty or negative times, ``num_workers < 0``,
    ``prefetch_factor < 1`` or a ``warmup`` that leaves no steps.
    """
    load_s = check_draw("load_s", load_s)
    step_s = check_draw("step_s", step_s)
    check_int("num_workers", num_workers, 0)
    if num_workers > 0:
        check_int("prefetch_factor", prefetch_factor, 1)
    check_int("n_batches", n_batches, 2)
    warmup = default_warmup(n_batches) if warmup is None else warmup
    check_int("warmup", warmup, 0)
    if warmup >= n_batches:
        raise LoadEvalError(
            f"warmup ({warmup}) must be smaller than n_batches ({n_batches}) to leave steps to measure."
        )
    if cores is not None:
        check_int("cores", cores, 1)
    if measured_workers is not None:
        check_int("measured_workers", measured_workers, 0)
    check_number("reserve_cores", reserve_cores, "a number of cores")
    check_number("handoff_s", handoff_s, "a time in seconds")
    loads, steps = draw_streams(load_s, step_s, n_batches, seed)
    scale = load_scale(num_workers, cores, measured_workers, reserve_cores)
    return run_model(loads, steps, num_workers, prefetch_factor or 0, warmup, scale, handoff_s)


def draw_streams(load_s: Draw, step_s: Draw, n: int, seed: int) -> tuple[list[float], list[float]]:
    loads = _draws(load_s, n, random.Random(seed), "load_s")
    steps = _draws(step_s, n, random.Random(f"{seed}:step"), "step_s")
    return loads, steps
