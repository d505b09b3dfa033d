"""The pusher: one thread per run that streams what is new to the live plots, on a budget.

The training loop only appends stamps (the core's C-level iterators); the pusher,
the only code touching the Bokeh documents while a run goes, reads what is new and
streams just those rows. It waits at least ``push_interval_s`` between pushes and,
when a push costs more than that allows, longer, so that pushing uses at most
``push_budget`` of one core (never less often than every ``MAX_PUSH_INTERVAL_S``).

It runs in a copy of the context of the thread that started it (the cell, or the button
callback running a rerun), so what it sends carries that request's parent header. A
thread of its own would send under the last request any kernel thread handled (ipykernel
7 falls back to it), such as a widget message from the browser; ipykernel then routes the
browser's replies to the plots to the subshell that message came from, where they run
beside the user's loop, each with a busy and an idle status.

Its clocks are injected (``clock`` for elapsed time, ``cpu_clock`` for the thread's CPU
time, ``stamp`` for the push spans), so tests drive it with fake ones and no sleeping.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Optional

from ..core._shared import LiveRun
from ..viz._shared import LIVE_ROLLOVER, startup_rows

log = logging.getLogger("loadeval_nb")

MAX_PUSH_INTERVAL_S = 3.0
"""However costly a push, the live plots move at least this often."""


def next_push_wait(cpu_per_push_s: float, min_interval_s: float, budget: float) -> float:
    """Seconds to wait before the next push so that pushing uses at most ``budget`` of one
    core (a push costing ``cpu_per_push_s``), within [``min_interval_s``, MAX_PUSH_INTERVAL_S]."""
    want = cpu_per_push_s / budget if budget > 0 else min_interval_s
    return max(min_interval_s, min(MAX_PUSH_INTERVAL_S, want))


def series_of(which: str, ev: Any) -> dict[str, str]:
    """The plot series each side of a live run feeds, by side: a wrapper of one side feeds
    the run ``which`` (a rung, a rerun's run), a wrapper of both sides (the interleaved
    pair) each side's own series. A live run without ``sides`` (a followed log) is one."""
    sides = tuple(getattr(ev, "sides", None) or (which,))
    return {s: s for s in sides} if len(sides) > 1 else {sides[0]: which}


def startup_positions(before: tuple[int, int], after: tuple[int, int], n: int) -> list[int]:
    """Which of ``n`` steps, read from cursor ``before`` to cursor ``after`` (epoch, step:
    ``LoaderEvaluator.steps_since``'s), open an epoch, and so carry its start-up (worker
    spawn, the first fetch): the first when the read began at an epoch's start, and the
    first of the epoch the read ended in when it began in an earlier one. (The first step of
    an epoch begun and ended between two reads is not told apart; the whole run drawn when
    the run ends is.)"""
    out: set[int] = set()
    if n and before[1] == 0:
        out.add(0)
    if after[0] > before[0] and 0 < after[1] <= n:
        out.add(n - after[1])
    return sorted(out)


class Pusher(threading.Thread):
    """Streams what is new in one run to a dashboard's plots and status line, throttled.

    ``dash`` provides ``step_src``, ``startup_src`` and ``util_src`` (Bokeh sources by run
    name), ``live_layout`` (whose document is held while pushing), ``set_status(text)``,
    ``push_interval_s``, ``push_budget`` and ``steps_per_run``.
    """

    def __init__(
        self,
        dash: Any,
        which: str,
        ev: LiveRun,
        label: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
        stamp: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        super().__init__(name="loadeval-dashboard", daemon=True)
        self.dash, self.which, self.ev, self.label = dash, which, ev, label
        self.clock, self.cpu_clock, self.stamp = clock, cpu_clock, stamp
        self.stop_event = threading.Event()
        self.series = series_of(which, ev)
        """The plot series of each side this run measures."""
        self.cursors: dict[str, tuple[int, int]] = {side: (0, 0) for side in self.series}
        self.counts: dict[str, int] = {side: 0 for side in self.series}
        self.n_steps = 0
        self.k_util = 0
        self.t_start = clock()
        self.failed = False
        self.cpu_s = 0.0  # CPU time this thread spent pushing
        self.pushes = 0
        self.cost_s: Optional[float] = None  # smoothed CPU time of one push
        self.last_cost_s: Optional[float] = None  # the CPU time of the last push
        # when each push ran (``stamp`` clock), and a switch to skip pushes: both for
        # bench/dashboard_overhead.py, which attributes step time to pushes
        self.spans: deque[tuple[int, int]] = deque(maxlen=4096)
        self.paused = False
        self._context = contextvars.copy_context()  # the starting thread's parent header

    def next_wait(self) -> float:
        """Seconds until the next push, from the measured cost of a push."""
        if self.cost_s is None:
            return float(self.dash.push_interval_s)
        return next_push_wait(self.cost_s, self.dash.push_interval_s, self.dash.push_budget)

    def run(self) -> None:
        self._context.run(self._loop)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.next_wait()):
            if not self.paused:
                self.push()

    def stop(self) -> None:
        self.stop_event.set()
        self.join()
        self.push()  # whatever came after the last tick

    def push(self) -> None:
        t_cpu, t0 = self.cpu_clock(), self.stamp()
        try:
            with self._held():
                self._push()
        except Exception as e:  # never break the user's run over a plot
            if not self.failed:
                self.failed = True
                log.warning("loadeval_nb: live plot update failed (%s); the run goes on.", e)
        finally:
            cost = self.cpu_clock() - t_cpu
            self.spans.append((t0, self.stamp()))
            self.cpu_s += cost
            self.last_cost_s = cost
            self.pushes += 1
            # smoothed, so one slow push (a big backlog) does not stall the plots
            self.cost_s = cost if self.cost_s is None else 0.7 * self.cost_s + 0.3 * cost

    @contextmanager
    def _held(self) -> Iterator[None]:
        """Everything new goes out as one combined patch of the plots' document (one comm
        message)."""
        doc = self.dash.live_layout.document
        if doc is not None:
            doc.hold("combine")
        try:
            yield
        finally:
            if doc is not None:
                doc.unhold()

    def _stream_steps(self, which: str, first: int, steps: list[int], startups: list[int]) -> None:
        """Stream ``steps`` (ns; numbered from ``first``) to run ``which``'s plot: those at
        positions ``startups`` (an epoch's first step: its start-up) to the run's start-up
        markers, which do not set the step axis, the rest to its line. A run's first steps
        replace the markers a previous run left."""
        up = set(startups)
        ms = [s / 1e6 for s in steps]
        line = [k for k in range(len(ms)) if k not in up]
        self.dash.step_src[which].stream(
            {"step": [first + k for k in line], "step_ms": [ms[k] for k in line]},
            rollover=LIVE_ROLLOVER,
        )
        if up:
            at = sorted(up)
            rows = startup_rows(which, [first + k for k in at], [ms[k] for k in at])
            src = self.dash.startup_src[which]
            if first == 0:
                src.data = rows
            else:
                src.stream(rows, rollover=LIVE_ROLLOVER)

    def _push(self) -> None:
        """Each side's new steps to its series, and each utilisation tick to the series of
        the side that ran then (in an interleaved pass, the block it fell in)."""
        for name, first, steps, startups in self.read_steps():
            self._stream_steps(name, first, steps, startups)
        ev, one = self.ev, len(self.series) == 1
        sampler, t0 = ev.util_sampler, ev.started_ns
        if sampler is not None and t0 is not None:
            data, self.k_util = sampler.since(self.k_util)
            times = data.pop("t_ns")
            for side, name in self.series.items():
                keep = [k for k, t in enumerate(times) if one or ev.side_at(t) == side]
                if keep:
                    src = self.dash.util_src[name]
                    row = {"t_s": [(times[k] - t0) / 1e9 for k in keep]}
                    row.update({c: [v[k] for k in keep] for c, v in data.items() if c in src.data})
                    src.stream(row, rollover=LIVE_ROLLOVER)
        self.dash.set_status(self.status_text())

    def read_steps(self) -> list[tuple[str, int, list[int], list[int]]]:
        """What each side completed since the last read: (its series, the number of its
        first new step, the new step times in ns, the positions among them of an epoch's
        first step: its start-up). Every live view reads a run through this."""
        ev, one = self.ev, len(self.series) == 1
        out = []
        for side, name in self.series.items():
            before = self.cursors[side]
            steps, after = ev.steps_since(side, before)
            self.cursors[side] = after
            if steps:
                n0 = self.counts[side]
                self.counts[side] += len(steps)
                # an epoch's first step is its start-up; a pass starts the loader once, so
                # only its first real step is
                if one:
                    up = startup_positions(before, after, len(steps))
                else:
                    up = [0] if n0 == 0 and side == "real" else []
                out.append((name, n0, steps, up))
        self.n_steps = sum(self.counts.values())
        return out

    def status_text(self) -> str:
        """``LABEL: step 40 of 200, 3.1 s elapsed`` (an interleaved pass: each side's)."""
        per_run = self.dash.steps_per_run
        of = " (adaptive stop)" if per_run == "auto" else f" of {per_run or '?'}"
        if len(self.series) == 1:
            done = f"step {self.n_steps}{of}"
        else:
            done = ", ".join(f"{s} step {n}" for s, n in self.counts.items()) + f"{of} each"
        return f"{self.label}: {done}, {self.clock() - self.t_start:.1f} s elapsed"
