"""What other ``num_workers`` / ``prefetch_factor`` settings would buy: the measured
setting and its alternatives simulated on the same draws (see :mod:`.simulator`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from .._env import cpu_count
from .._errors import check_int, check_number
from ..errors import LoadEvalError
from .simulator import (
    Draw,
    SimResult,
    check_draw,
    default_warmup,
    draw_streams,
    load_scale,
    run_model,
    usable_cores,
)


@dataclass
class Prediction:
    """Simulated throughput over a range of settings, relative to the measured one."""

    baseline: SimResult
    """The measured setting, simulated (speedups are relative to this, not to a measurement)."""
    ideal_steps_per_s: float
    """1 / mean compute step: the rate with a loader that never makes the loop wait."""
    results: list[SimResult]
    """One per simulated (num_workers, prefetch_factor); ``num_workers=0`` once."""
    smallest_workers: Optional[int]
    """Smallest ``num_workers`` at the measured prefetch factor reaching ``target`` × ideal."""
    cores: int
    cores_ok: bool
    """``smallest_workers`` fits the cores left beside the main process (always true
    without ``contention``: workers that mostly wait need not have a core each)."""
    target: float = 0.95
    contention: bool = True
    _inputs: dict = field(default_factory=dict, repr=False, compare=False)

    def result(self, num_workers: int, prefetch_factor: Optional[int] = None) -> SimResult:
        """The simulated setting (computed now if it was not in the grid).

        ``prefetch_factor`` defaults to the measured one.
        """
        pf = self._inputs["prefetch_factor"] if prefetch_factor is None else prefetch_factor
        if num_workers == 0:
            pf = None
        for r in self.results:
            if r.num_workers == num_workers and r.prefetch_factor == pf:
                return r
        check_int("num_workers", num_workers, 0)
        if num_workers:
            check_int("prefetch_factor", pf, 1)
        r = _sim(self._inputs, num_workers, pf or 0)
        self.results.append(r)
        return r

    def speedup(self, num_workers: int, prefetch_factor: Optional[int] = None) -> float:
        """Simulated steps/s at that setting over the simulated steps/s at the measured one."""
        return self.result(num_workers, prefetch_factor).steps_per_s / self.baseline.steps_per_s

    def curve(self, prefetch_factor: Optional[int] = None) -> list[SimResult]:
        """Results at one prefetch factor (default: the measured one) for every simulated
        ``num_workers``, ``num_workers=0`` first (another prefetch factor is simulated now)."""
        return [self.result(w, prefetch_factor) for w in self._inputs["workers"]]

    def advised(self) -> Optional[int]:
        """The ``num_workers`` :meth:`line` advises (None where it advises no change):
        what ``--try advice`` measures."""
        return self._choice()[1]

    def _choice(self) -> tuple[str, Optional[int], float]:
        """What :meth:`line` says: ``("enough", None, 1)``, ``("smallest", w, speedup)``,
        ``("best", w, gain)`` (short of loader-free) or ``("none", None, gain)``."""
        b = self.baseline
        ideal = self.ideal_steps_per_s
        if b.steps_per_s >= self.target * ideal:
            return "enough", None, 1.0
        usable = usable_cores(self.cores, self._inputs["reserve_cores"])
        w = self.smallest_workers
        # workers that compute need a core each: never advise more than the cores can run
        cap = max(1, int(usable)) if self.contention else None
        if w is not None and (cap is None or w <= cap or self.cores_ok):
            return "smallest", w, self.speedup(w)
        curve = [r for r in self.curve() if cap is None or r.num_workers <= cap]
        top = max(r.steps_per_s for r in curve)
        best = next(r for r in curve if r.steps_per_s >= 0.99 * top)  # fewest workers
        gain = best.steps_per_s / b.steps_per_s
        if gain < 1.05:
            return "none", None, gain
        return "best", best.num_workers, gain

    def line(self) -> str:
        """One sentence: what changing ``num_workers`` would buy."""
        b = self.baseline
        pct = round((1 - self.target) * 100)
        usable = usable_cores(self.cores, self._inputs["reserve_cores"])
        kind, w, gain = self._choice()
        if kind == "enough":
            return (
                f"num_workers={b.num_workers} already runs within {pct} % of the speed of a loader "
                f"that never makes the loop wait; more workers would not help."
            )
        if kind == "smallest":
            assert w is not None
            if w > usable and not self.contention:
                fit = "loading mostly waits, so workers need not have a core each"
            elif self.cores_ok:
                fit = (
                    f"{w} worker{'' if w == 1 else 's'} fit{'s' if w == 1 else ''} the "
                    f"{self.cores} core{'' if self.cores == 1 else 's'}"
                )
            else:
                fit = (
                    f"{w} workers are more than the {_cores(usable)} left beside the main "
                    f"process: expect less"
                )
            return f"with num_workers={w}: {_times(gain)} ({fit})"
        if kind == "none":
            return (
                f"no num_workers setting gets within {pct} % of the loader-free speed on "
                f"{_cores(self.cores)}, nor beats num_workers={b.num_workers}: loading itself must "
                f"get cheaper."
            )
        return (
            f"with num_workers={w}: {_times(gain)}, still short of the loader-free "
            f"speed on {_cores(self.cores)}: loading itself must get cheaper to go further."
        )


def _cores(n: float) -> str:
    return "1 core" if n == 1 else f"{n:g} cores"


def _times(x: float) -> str:
    if x < 1.05:
        return "about as fast"
    return f"about {x:.1f}× faster"


def predict(
    load_s: Draw,
    step_s: Draw,
    *,
    num_workers: int,
    prefetch_factor: int = 2,
    cores: Optional[int] = None,
    contention: bool = True,
    reserve_cores: float = 1.0,
    handoff_s: float = 0.0,
    workers: Optional[Iterable[int]] = None,
    n_batches: int = 4000,
    seed: int = 0,
    target: float = 0.95,
) -> Prediction:
    """Simulate the measured setting and the alternatives.

    ``load_s``, ``step_s``: as for :func:`simulate`, measured at ``num_workers`` /
    ``prefetch_factor`` (the baseline). ``cores`` defaults to the CPUs this process
    may run on; with ``contention`` the load times are scaled as in the module
    docstring (turn it off for loads that do not use a CPU), the main process keeping
    ``reserve_cores`` busy; ``handoff_s`` is the per-batch cost of taking a batch
    from a worker (see the module docstring). ``workers`` (default
    ``0 .. max(16, 2 × cores)``) are simulated at the measured prefetch factor; other
    settings when asked for (:meth:`Prediction.result`, :meth:`Prediction.curve`).
    ``target`` is the share of the loader-free rate ``smallest_workers`` must reach.

    Raises :class:`LoadEvalError` on bad input, as :func:`simulate`.
    """
    load_s = check_draw("load_s", load_s)
    step_s = check_draw("step_s", step_s)
    check_int("num_workers", num_workers, 0)
    check_int("prefetch_factor", prefetch_factor, 1)
    check_int("n_batches", n_batches, 2)
    cores = cpu_count() if cores is None else check_int("cores", cores, 1)
    check_number("reserve_cores", reserve_cores, "a number of cores")
    check_number("handoff_s", handoff_s, "a time in seconds")
    if not 0 < target <= 1:
        raise LoadEvalError(f"target must be a share in (0, 1], not {target!r}.")
    ws = sorted(set(range(max(16, 2 * cores) + 1) if workers is None else workers))
    if not ws:
        raise LoadEvalError("workers is empty; pass the num_workers values to simulate.")
    for w in ws:
        check_int("each of workers", w, 0)
    loads, steps = draw_streams(load_s, step_s, n_batches, seed)
    inputs = dict(
        loads=loads,
        steps=steps,
        warmup=default_warmup(n_batches),
        cores=cores if contention else None,
        measured_workers=num_workers if contention else None,
        reserve_cores=reserve_cores,
        handoff_s=handoff_s,
        prefetch_factor=prefetch_factor,
        workers=ws,
    )
    results = [_sim(inputs, w, prefetch_factor) for w in ws]
    baseline = next((r for r in results if r.num_workers == num_workers), None)
    if baseline is None:
        baseline = _sim(inputs, num_workers, prefetch_factor)
        results.append(baseline)
    if baseline.compute_s <= 0:
        raise LoadEvalError(
            "step_s is all zero, so a loader-free loop would be infinitely fast; pass measured "
            "step times in seconds."
        )
    ideal = 1.0 / baseline.compute_s
    reach = [r.num_workers for r in results if r.steps_per_s >= target * ideal]
    smallest = min(reach) if reach else None
    return Prediction(
        baseline=baseline,
        ideal_steps_per_s=ideal,
        results=results,
        smallest_workers=smallest,
        cores=cores,
        cores_ok=smallest is not None
        and (not contention or smallest <= usable_cores(cores, reserve_cores)),
        target=target,
        contention=contention,
        _inputs=inputs,
    )


def _sim(inputs: dict[str, Any], num_workers: int, prefetch_factor: int) -> SimResult:
    """One setting, from the inputs a :class:`Prediction` keeps (without the waits)."""
    scale = load_scale(
        num_workers, inputs["cores"], inputs["measured_workers"], inputs["reserve_cores"]
    )
    pf = prefetch_factor if num_workers else 0
    return run_model(
        inputs["loads"], inputs["steps"], num_workers, pf, inputs["warmup"], scale,
        inputs["handoff_s"], keep_waits=False,
    )  # fmt: skip
