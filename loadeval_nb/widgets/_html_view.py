"""The html view: live step times as HTML/SVG refreshed through an IPython display handle.

For hosts where third-party widget JavaScript cannot load (VS Code without
``jupyter.widgetScriptSources``, Colab, a JupyterLab without jupyter_bokeh's labextension):
``display(..., display_id=True)`` and ``handle.update(...)`` are part of the Jupyter message
spec and need no widget JavaScript at all. The status line and each side's step times
(:func:`loadeval_nb.viz.steps_svg`) are drawn again at each push, about once a second, by
an :class:`HtmlPusher`: the :class:`~._pusher.Pusher`'s thread, reading and budget, drawing
SVG instead of streaming Bokeh rows. The verdict, the rerun panel and the history are the
dashboard's ipywidgets-core widgets, with no Bokeh model in their box.
"""

from __future__ import annotations

import html
import threading
from array import array
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Optional

from IPython.display import display

from ..core._shared import LiveRun
from ..core.measure import LoaderEvaluator
from ..core.record import Run
from ..viz import steps_svg
from ._dashboard import Dashboard
from ._pusher import Pusher, next_push_wait, series_of

HTML_PUSH_INTERVAL_S = 1.0
"""The html view is drawn again at most this often (its pusher's budget may space it more)."""
LIVE_POINTS = 300
"""Points a side while the run goes (each bucket's minimum and maximum): a drawing costs
in proportion, and the chart is ~460 px wide; the whole run, once ended, gets the saved
copy's 600."""


class LiveSteps:
    """The step times of one series read so far (ns), and the epoch each fell in: machine
    integers, which the chart's NumPy reads without a copy (a push draws every step)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.step_ns = array("q")
        self.block = array("q")
        self._epoch = 0

    def add(self, steps: list[int], startups: list[int]) -> None:
        """``steps`` read since the last call; those at ``startups`` open an epoch."""
        k0 = 0
        for k in sorted(startups):
            if k > 0 or self.step_ns:
                self.block.extend([self._epoch] * (k - k0))
                self._epoch += 1
                k0 = k
        self.block.extend([self._epoch] * (len(steps) - k0))
        self.step_ns.extend(steps)

    def run(self) -> Run:
        """What was read, as a run record the SVG chart draws."""
        return Run(mode=self.name, start_ns=[], step_ns=self.step_ns, block=self.block)  # type: ignore[arg-type]


class HtmlPusher(Pusher):
    """The pusher of the html view: the new steps of each side to its :class:`LiveSteps`,
    then the view drawn again, once (no Bokeh document to hold). A drawing holds the whole
    run, so each costs more than the one before: the next push is spaced by the cost of
    the last one when that is more than the smoothed cost, so that the smoothing, which
    lags behind a cost that only grows, does not overdraw the budget."""

    def _held(self) -> AbstractContextManager[None]:
        return nullcontext()

    def next_wait(self) -> float:
        if self.cost_s is None or self.last_cost_s is None:
            return super().next_wait()
        cost = max(self.cost_s, self.last_cost_s)
        return next_push_wait(cost, self.dash.push_interval_s, self.dash.push_budget)

    def _push(self) -> None:
        new = self.read_steps()
        with self.dash.lock:  # not while the cell's thread draws (it reads the arrays)
            for name, _first, steps, startups in new:
                self.dash.live_steps(name).add(steps, startups)
        self.dash.set_status(self.status_text())


class HtmlDashboard(Dashboard):
    """The dashboard for hosts without jupyter_bokeh's JavaScript: its live view is an HTML
    output (the status line and the step-time SVG) refreshed through a display handle; the
    verdict card, the rerun panel and the history table are ipywidgets core, shown under
    it; no Bokeh widget anywhere. ``live=False``: the widgets only, with their own status
    line."""

    uses_bokeh = False

    def __init__(self, *, push_interval_s: float = HTML_PUSH_INTERVAL_S, **kwargs: Any) -> None:
        super().__init__(push_interval_s=push_interval_s, **kwargs)
        self.handle: Any = None
        self.renders = 0
        self._steps: dict[str, LiveSteps] = {}
        self._runs: dict[str, Run] = {}  # whole runs, drawn in place of their live steps
        self._color = "#333"
        self.lock = threading.Lock()
        """Held while the live steps grow or are drawn."""
        if self.live:
            self.status.layout.display = "none"  # the live view says it

    # -- the live output ---------------------------------------------------------------
    def show(self) -> None:
        """The live output (a display handle), then the widgets."""
        if self.live:
            self.handle = display(self.live_bundle(), raw=True, display_id=True)
        display(self.mimebundle(), raw=True)

    def sweep_view(self) -> Dashboard:
        """A sweep from the panel: its status line and card in widgets (a display made
        from a button's callback lands in no cell's output)."""
        return HtmlDashboard(
            loader_name=self.loader_name,
            steps_per_run=self.steps_per_run,
            live=False,
            sweep=True,
            width=self.width,
        )

    def live_steps(self, name: str) -> LiveSteps:
        """The live steps of series ``name`` (made on first use)."""
        steps = self._steps.get(name)
        if steps is None:
            steps = self._steps[name] = LiveSteps(name)
        return steps

    def live_bundle(self) -> dict[str, str]:
        """The live output now: the status line and each series' step times."""
        runs: list[tuple[str, Optional[Run]]] = [(n, r) for n, r in self._runs.items()]
        runs += [(n, s.run()) for n, s in self._steps.items() if n not in self._runs]
        status = self.status_text() or "Starting…"
        note = f"<span style='color:#999'> · {html.escape(self.note)}</span>" if self.note else ""
        points = LIVE_POINTS if self._pusher is not None else 600
        chart = (
            steps_svg(runs, width=min(self.width, 760), max_points=points)
            if any(r.n_steps for _, r in runs)
            else ""
        )
        return {
            "text/html": f"<div class='loadeval-live {self.uid}-live'>"
            f"<style>.{self.uid}-live svg{{max-width:100%;height:auto}}</style>"
            "<div class='loadeval-status' style='font-family:monospace;font-size:13px;"
            f"color:{self._color}'>{html.escape(status)}{note}</div>{chart}</div>",
            "text/plain": f"loadeval_nb: {status}",
        }

    def render(self) -> None:
        """Draw the live output again (from the pusher's thread or the cell's)."""
        if self.handle is None:
            return
        with self.lock:
            self.handle.update(self.live_bundle(), raw=True)
            self.renders += 1

    # -- the hooks -------------------------------------------------------------------
    def set_status(self, text: str, color: str = "#333") -> None:
        self._status_text, self._color = text, color
        if self.live:
            self.render()
        else:
            super().set_status(text, color)

    def pair_starting(self, label: str = "") -> None:
        self._steps.clear()
        self._runs.clear()
        super().pair_starting(label)

    def run_started(self, which: str, ev: LoaderEvaluator, index: int, total: int) -> None:
        for name in series_of(which, ev).values():
            self._steps.pop(name, None)
            self._runs.pop(name, None)
        super().run_started(which, ev, index, total)

    def _new_pusher(self, which: str, ev: LiveRun, label: str) -> Pusher:
        return HtmlPusher(self, which, ev, label)

    def run_ended(self, which: str, ev: LiveRun, error: Optional[BaseException]) -> None:
        series = series_of(which, ev)
        if self.live:
            if self._pusher is not None:
                self._pusher.stop()
                self._pusher = None
            for side, name in series.items():
                self._runs[name] = ev.to_run() if len(series) == 1 else ev.to_run(side)
        super().run_ended(which, ev, error)
        self.render()  # the whole runs, and a failure's status line
