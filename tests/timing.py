"""Timed tests that hold on a busy machine.

A test that can runs on an injected clock (the ``clock`` and ``fake_time`` fixtures of
``conftest.py``) and never sleeps. The ground truths that must sleep (worker processes,
a fresh interpreter, real CPU readings) use what is here:

* :func:`abba`: the tool and an independent stopwatch on the same loop, taken
  interleaved (stopwatch, tool, tool, stopwatch), so that a load that comes and goes
  falls on both alike; it returns their ratio.
* :func:`retry_once`: one more try of the whole measurement after a failed assertion.
* "disturbed means retry": a failed assertion on a run that the tool itself marked
  disturbed (a :class:`~loadeval_nb.verdict.Diagnosis` with ``disturbed``, a run with a busy
  note), or during which other processes used the machine (:class:`OtherLoad`, measured
  around every try), is retried; if the retry is disturbed too, the test is skipped with
  the reason ("the machine was busy: ..."), never failed. On a quiet machine nothing is
  excused: a reading off by 2x fails, twice.
"""

from __future__ import annotations

import contextlib
import functools
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable, Optional

import psutil
import pytest

from loadeval_nb.core.verdict.diagnose import BUSY_SHARE, busy_note

# ---- the machine's load, by other processes than this test's -----------------------------


def _system_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores; idle and I/O wait left out)."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    return sum(t) - idle - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def _reaped_s() -> float:
    """CPU seconds of this process's children that ended and were waited for (and of
    their own children that they waited for), as the kernel adds them up."""
    t = os.times()
    return t.children_user + t.children_system


def _alive_s(me: psutil.Process) -> dict[int, float]:
    out = {}
    for p in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            out[p.pid] = _cpu_s(p)
    return out


class OtherLoad:
    """How many cores other processes (not this one, not the processes it started) kept
    busy between :meth:`start` and :meth:`stop`: the machine's busy time less ours. Ours
    are this process, its children that ended and were waited for on the way (a
    DataLoader's workers, a subprocess and its own children: the kernel adds their CPU
    time to ours when they are reaped), and those still alive at :meth:`stop`, read
    then. Nothing runs in between: a thread scanning the processes would take the GIL
    from the Python-bound loops the tests time. The machine was busy when others used
    half a core and ``BUSY_SHARE`` of the cores at least, the tool's own rule."""

    def __init__(self) -> None:
        self.cores: Optional[float] = None
        self.wall_s = 0.0
        self._me = psutil.Process()
        self._alive0: dict[int, float] = {}
        self._running = False
        self._t0 = self._sys0 = self._own0 = self._reaped0 = 0.0

    def start(self) -> OtherLoad:
        self._alive0 = _alive_s(self._me)  # what our processes used before does not count
        self._t0, self._sys0 = time.perf_counter(), _system_busy_s()
        self._own0, self._reaped0 = _cpu_s(self._me), _reaped_s()
        self._running = True
        return self

    def stop(self) -> OtherLoad:
        if not self._running:
            return self
        self._running = False
        alive = _alive_s(self._me)
        own = _cpu_s(self._me) - self._own0 + _reaped_s() - self._reaped0
        own += sum(v - self._alive0.get(pid, 0.0) for pid, v in alive.items())
        # a child alive at the start and reaped since: its time before the start is in
        # the reaped total too
        own -= sum(v for pid, v in self._alive0.items() if pid not in alive)
        self.wall_s = time.perf_counter() - self._t0
        other = _system_busy_s() - self._sys0 - own
        self.cores = max(0.0, other) / self.wall_s if self.wall_s > 0 else 0.0
        return self

    def __enter__(self) -> OtherLoad:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reason(self) -> Optional[str]:
        """The sentence for a busy machine, or None when it was quiet (or not measured)."""
        if self.cores is None:
            return None
        n = os.cpu_count() or 1
        if self.cores < 0.5 or self.cores < BUSY_SHARE * n:
            return None
        return (
            f"other processes kept {self.cores:.1f} of {n} cores busy during "
            f"{self.wall_s:.1f} s of the test"
        )


# ---- disturbed: said by the tool, or by the load meter ---------------------------------------


class Disturbed(Exception):
    """A failed check on a run that was disturbed: a reason to measure again, not a bug."""


def disturbance(*sources: Any) -> Optional[str]:
    """Why the measurement in ``sources`` was disturbed, or None. A source is a
    ``Diagnosis`` (its ``disturbed`` runs), a result holding one (``.diagnosis``), a
    ``Run`` or an evaluator (its busy note), an :class:`OtherLoad`, a string (a reason
    already found) or None (nothing to say)."""
    reasons = []
    for s in sources:
        if s is None:
            continue
        if isinstance(s, str):
            reasons.append(s)
        elif isinstance(s, OtherLoad):
            why = s.reason()
            if why:
                reasons.append(why)
        elif hasattr(s, "disturbed") and hasattr(s, "notes"):  # a Diagnosis
            if s.disturbed:
                notes = [n for n in s.notes if "disturbed" in n]
                reasons.append("; ".join(notes) or f"the tool marked {s.disturbed} disturbed")
        elif getattr(s, "diagnosis", None) is not None:  # a pair's result
            why = disturbance(s.diagnosis)
            if why:
                reasons.append(why)
        else:  # a Run, or an evaluator
            run = s.to_run() if hasattr(s, "to_run") else s
            why = busy_note(run, run.label or run.mode)
            if why:
                reasons.append(why)
    return "; ".join(reasons) or None


@contextlib.contextmanager
def excused_if_busy(*sources: Any) -> Iterator[None]:
    """Checks whose failure, when a source says the run was disturbed, raises
    :class:`Disturbed` (retried, then skipped by :func:`retry_once`) instead."""
    try:
        yield
    except AssertionError as e:
        why = disturbance(*sources)
        if why:
            raise Disturbed(f"{why} (and then: {_short(e)})") from e
        raise


def _short(e: BaseException, limit: int = 200) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def retry_once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run the test again, once, when it fails; a failure on a disturbed machine (the
    tool said so, or :class:`OtherLoad` measured it around the try) is retried and, when
    the retry is disturbed too, skipped with the reason. Any other second failure fails."""

    @functools.wraps(fn)
    def twice(*args: Any, **kwargs: Any) -> Any:
        first = ""
        for attempt in (1, 2):
            load = OtherLoad().start()
            try:
                return fn(*args, **kwargs)
            except Disturbed as e:
                why = str(e)
            except AssertionError as e:
                why = load.stop().reason()
                if why is None:
                    if attempt == 2:
                        raise
                    first = f"first try failed: {_short(e)}"
                    continue
                why = f"{why} (and then: {_short(e)})"
            finally:
                load.stop()
            if attempt == 2:
                then = f"; {first}" if first else ""
                pytest.skip(f"the machine was busy: {why}{then} [{fn.__name__}]")
            first = f"first try disturbed: {why}"
        raise AssertionError("unreachable")  # pragma: no cover

    return twice


# ---- the tool against a stopwatch, interleaved -----------------------------------------------


@dataclass
class Interleaved:
    """Per-step times (seconds) read by an independent stopwatch and by the tool, taken
    in A B B A order."""

    stopwatch: list[float]
    tool: list[float]

    @property
    def ratio(self) -> float:
        """The tool's mean reading over the stopwatch's: 1.0 when they agree."""
        return statistics.fmean(self.tool) / statistics.fmean(self.stopwatch)

    def __str__(self) -> str:
        a = ", ".join(f"{x * 1e3:.2f}" for x in self.stopwatch)
        b = ", ".join(f"{x * 1e3:.2f}" for x in self.tool)
        return f"tool/stopwatch {self.ratio:.3f} (stopwatch ms: {a}; tool ms: {b})"


def abba(stopwatch: Callable[[], float], tool: Callable[[], float], rounds: int = 1) -> Interleaved:
    """``stopwatch()`` times the bare loop, ``tool()`` returns the tool's reading of the
    same loop (both seconds per step); run as A B B A (``rounds`` times), so that a drift in
    the machine's load weighs on both sides alike."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        a.append(stopwatch())
        b.append(tool())
        b.append(tool())
        a.append(stopwatch())
    return Interleaved(a, b)


def steady_mean_s(stamps: list[float], warmup: int) -> float:
    """A stopwatch's mean step (seconds) from the times the loop got each batch, the first
    ``warmup`` steps left out."""
    steps = [b - a for a, b in zip(stamps, stamps[1:])][warmup:]
    return sum(steps) / len(steps)
