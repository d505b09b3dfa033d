"""The live dashboard: status line, streamed Bokeh plots, verdict card, rerun panel, history.

The widget and the hooks that feed it during a pair, a ladder or a sweep; the
cards it shows are in :mod:`..viz._cards`, the thread that streams the plots in
:mod:`._pusher`. Series roll over at ``LIVE_ROLLOVER`` points; when a run ends its
plot is replaced by the whole run, decimated.

Its saved copy (:meth:`Dashboard.saved_copy`) stands in for it wherever the live widget
cannot render: a reopened notebook (no widget state: "Loading widget…" or "model not
found") or a reloaded page (BokehJS is no longer on it). CSS in the copy hides this
cell's widget outputs that did not render and the dashboard if a plot failed; the
dashboard's own CSS hides the copy while the dashboard works.
"""

from __future__ import annotations

import html
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

import ipywidgets as W
from bokeh.layouts import column
from IPython.display import display

from ..core._shared import HistoryRow, LiveRun, fmt_times
from ..core.explore import LadderResult, PairResult, SweepHooks, SweepPoint, SweepResult
from ..core.measure import LoaderEvaluator, gpu_status
from ..viz import verdict_html
from ..viz._shared import (
    DISTURBED_COLOR,
    LIVE_ROLLOVER,
    SIDES,
    history_data,
    history_figure,
    history_html,
    ladder_html,
    live_step_figure,
    live_util_figure,
    pair_config,
    startup_data,
    steps_data,
    sweep_data,
    sweep_figure,
    sweep_html,
)
from ._bokeh import DisplayOnlyBokehModel, load_bokehjs, unload_bokehjs_output
from ._panel import advised_sweep
from ._pusher import Pusher, series_of
from ._saved import static_bundle

_ids = itertools.count(1)

NOT_YET = (
    "<div class='loadeval-not-yet' style='font-family:sans-serif;font-size:12px;color:#777'>"
    "No result yet: the run had not finished when this copy was saved.</div>",
    "loadeval_nb: no result yet (the run had not finished when this copy was saved).",
)

LIVE_ONLY = "loadeval_nb live dashboard: the saved copy below holds the result."
"""The dashboard's plain text, where widgets do not render."""

RUN_TITLES = {
    "pair": "real loader and replayed cache, interleaved",
    "real": "real loader",
    "ideal": "replayed cache",
    "device": "ladder: batches cached on the GPU",
    "host": "ladder: batches cached in host memory",
    "samples": "ladder: real loader over cached samples",
}


class Dashboard(SweepHooks):
    """The widget shown by ``%%loadeval``; also the hooks that feed it during a pair,
    a caching ladder (``runs`` = the rungs) or a sweep.

    Its live plots are Bokeh models inside ipywidgets (jupyter_bokeh's widget JavaScript
    must load in the page); each sits in an ``Output`` of its own, so that where they
    cannot render the status line, the verdict and the rerun panel (ipywidgets core) still
    do. :class:`~._html_view.HtmlDashboard` and :class:`~._text_view.TextDashboard` are the
    views for hosts without that JavaScript and for a terminal.
    """

    uses_bokeh = True
    """Whether its live plots are Bokeh widgets (BokehJS goes to the page first)."""
    shows_panel = True
    """Whether a rerun panel given to :meth:`set_panel` can show."""

    def __init__(
        self,
        *,
        loader_name: str,
        steps_per_run: Any,
        live: bool = True,
        push_interval_s: float = 0.5,
        push_budget: float = 0.0025,
        width: int = 900,
        runs: tuple[str, ...] = SIDES,
        sweep: bool = False,
    ) -> None:
        self.loader_name = loader_name
        self.steps_per_run = steps_per_run
        self.live = live
        self.sweep = sweep
        self.width = width
        self.push_interval_s = push_interval_s
        self.push_budget = push_budget
        self.uid = f"loadeval-{next(_ids)}-{int(time.time() * 1000) % 100000}"
        self.static_class = f"{self.uid}-static"
        self.note = gpu_notice()  # the core's one line about missing GPU readings, once
        self.gpu = bool(gpu_status()["available"])
        self.rows: list[HistoryRow] = []
        self._pusher: Optional[Pusher] = None
        self._pair_label = ""
        self._shown: set[str] = set()
        """The runs (lines) this pair has run so far."""
        self._panel: Any = None  # the RerunPanel shown, if any
        self.advised_sweep: Optional[str] = None
        """The sweep the last verdict card recommends, trimmed to the cores (the panel's)."""
        self.status = W.HTML(value=self._status_html("Starting…"))
        # Hides this dashboard's static copy while the live widget is on the page and its
        # plots rendered (otherwise the copy shows: a reopened notebook, a reloaded page);
        # dims the verdict of the pair a rerun replaces.
        self.style = W.HTML(
            value=f"<style>body:not(:has(.{self.uid} .jupyter-widgets-error-widget)) "
            f".{self.static_class}{{display:none}} "
            f".{self.uid} .loadeval-stale{{opacity:0.35}}</style>"
        )
        self.verdict = W.HTML(value="")
        self.verdict.add_class("loadeval-verdict-box")
        self.history = W.HTML(value="")
        self.errors = W.Output()
        self.step_fig, self.step_src, self.startup_src = live_step_figure(width=width, names=runs)
        self.util_fig, self.util_src = live_util_figure(self.gpu, width=width, names=runs)
        self.sweep_fig: Any = None
        self.sweep_src: dict[str, Any] = {}
        self.hist_fig, self.hist_src = history_figure(width=min(width, 560))
        children: list[Any] = [self.style, self.status]
        self.live_view = self.hist_view = None
        if sweep:
            self.sweep_fig, self.sweep_src = sweep_figure(width=min(width, 700))
        # All live figures in one Bokeh document: a push is one PATCH-DOC message.
        figs = [self.step_fig, self.util_fig] + ([self.sweep_fig] if sweep else [])
        for f in figs:  # as wide as the notebook (the file browser open, say), up to its width
            f.sizing_mode = "stretch_width"
            f.max_width = f.width
            f.min_width = 400
        self.live_layout = column(*figs, sizing_mode="stretch_width")
        if live and self.uses_bokeh:
            self.live_view = DisplayOnlyBokehModel(self.live_layout)
            children.append(_plots(self.live_view))
        children += [self.verdict, self.errors]
        self.panel_box = W.VBox([])
        self.history_box = W.VBox([W.HTML("<b>History</b>"), self.history])
        if live and self.uses_bokeh:
            self.hist_view = DisplayOnlyBokehModel(self.hist_fig)
            self.history_box.children = (*self.history_box.children, _plots(self.hist_view))
        self.history_box.layout.display = "none"
        children += [self.panel_box, self.history_box]
        # never wider than the notebook: what does not fit scrolls in its own box
        self.widget = W.VBox(children, layout=W.Layout(width="100%", max_width=f"{width + 40}px"))
        self.widget.add_class("loadeval-dashboard")
        self.widget.add_class(self.uid)

    @property
    def pusher(self) -> Optional[Pusher]:
        """The thread streaming the run in progress (None between runs)."""
        return self._pusher

    # -- status ------------------------------------------------------------------
    def _status_html(self, text: str, color: str = "#333") -> str:
        note = (
            f"<span class='loadeval-note' style='color:#999'> · {html.escape(self.note)}</span>"
            if self.note
            else ""
        )
        return (
            f"<div class='loadeval-status' style='font-family:monospace;font-size:13px;color:{color}'>"
            f"{html.escape(text)}{note}</div>"
        )

    def set_status(self, text: str, color: str = "#333") -> None:
        self._status_text = text
        self.status.value = self._status_html(text, color)

    def show(self) -> None:
        """Display the dashboard (BokehJS first, in an output emptied at once: the page ran
        it as it showed it, so a notebook saved during the run does not keep it)."""
        bokehjs = load_bokehjs() if self.live_view is not None else None
        display(self.mimebundle(), raw=True)
        unload_bokehjs_output(bokehjs)

    def sweep_view(self) -> Dashboard:
        """A dashboard for a sweep started from the rerun panel, shown inside this one's
        widget (:meth:`add_view`)."""
        return type(self)(
            loader_name=self.loader_name,
            steps_per_run=self.steps_per_run,
            live=self.live,
            sweep=True,
            width=self.width,
        )

    def mimebundle(self) -> dict[str, Any]:
        """The dashboard's cell output: its widget view, and for frontends that do not
        render widgets (nbconvert, GitHub) one line in words, not ``VBox(children=(HTML(...``:
        the saved copy under it holds the result."""
        return {**self.widget._repr_mimebundle_(), "text/plain": LIVE_ONLY}

    # -- the saved copy -----------------------------------------------------------------
    def saved_copy(self, cards: list[tuple[str, str]]) -> dict[str, str]:
        """The cell output kept in a saved notebook: ``cards`` (or a line saying the run had
        not finished) and the CSS that lets it stand in for this dashboard."""
        bundle = static_bundle(self.static_class, cards or [NOT_YET])
        # JupyterLab: a widget output of this cell (the widget renderer is its one output
        # that is a panel) holding no view ("Loading widget…", "Error displaying widget:
        # model not found") is hidden, and if a plot could not render, so are the plots
        # and the verdict (the copy has both); the status line and the rerun panel stay.
        # The copy shows instead (the dashboard's CSS hides it while it works)
        style = (
            f"<style>.jp-OutputArea:has(.{self.static_class}) .jp-OutputArea-output.lm-Panel"
            f":not(:has(> .lm-Widget)){{display:none}} "
            f".{self.uid} .loadeval-plots:has(.jupyter-widgets-error-widget){{display:none}} "
            f".{self.uid}:has(.jupyter-widgets-error-widget) .loadeval-verdict-box{{display:none}}"
            "</style>"
        )
        return {**bundle, "text/html": style + bundle["text/html"]}

    # -- hooks: called by run_pair ------------------------------------------------
    def pair_starting(self, label: str = "") -> None:
        """A pair starts (a rerun from the panel, say): the previous pair's series are
        cleared and its verdict dimmed until the new one replaces it; ``label`` (the
        rerun's, e.g. ``#2 num_workers=1 c4``) is said in the status line."""
        self._pair_label = label
        self._shown.clear()
        for src in (*self.step_src.values(), *self.startup_src.values(), *self.util_src.values()):
            src.data = {k: [] for k in src.data}
        if self.verdict.value:
            self.verdict.add_class("loadeval-stale")
        self.widget.add_class("loadeval-running")

    def run_started(self, which: str, ev: LoaderEvaluator, index: int, total: int) -> None:
        what = RUN_TITLES.get(which, which)
        if which == "real" and ev.label not in (None, "real"):
            what = f"real loader, {ev.label}"
        label = f"Run {index + 1} of {total} ({what})"
        if self._pair_label:
            label = f"{self._pair_label}: {label[0].lower()}{label[1:]}"
        self.set_status(f"{label}: starting")
        # the lines of the runs this pair ran so far (a pass's: the arms its plan serves)
        self._shown.update(series_of(which, ev).values())
        self._show_lines()
        # a new pair starts: clear this run's series from the previous pair
        for name in series_of(which, ev).values():
            self.step_src[name].data = {k: [] for k in self.step_src[name].data}
            self.util_src[name].data = {k: [] for k in self.util_src[name].data}
        if self.live:
            self._pusher = self._new_pusher(which, ev, label)
            self._pusher.start()

    def _show_lines(self) -> None:
        """Each run's lines (and legend entries) shown where it ran in this pair, hidden
        otherwise: an arm the pass's plan left out draws nothing."""
        for fig, sources in (
            (self.step_fig, (self.step_src, self.startup_src)),
            (self.util_fig, (self.util_src,)),
        ):
            mine = {id(src): name for by_name in sources for name, src in by_name.items()}
            for r in fig.renderers:
                name = mine.get(id(getattr(r, "data_source", None)))
                if name is not None:
                    r.visible = name in self._shown
            for legend in fig.legend:
                for item in legend.items:
                    names = {mine.get(id(getattr(r, "data_source", None))) for r in item.renderers}
                    if names & set(self.step_src):
                        item.visible = bool(names & self._shown)

    def _new_pusher(self, which: str, ev: LiveRun, label: str) -> Pusher:
        return Pusher(self, which, ev, label)

    def run_ended(self, which: str, ev: LiveRun, error: Optional[BaseException]) -> None:
        if self._pusher is not None:
            self._pusher.stop()
            self._pusher = None
        # closed: the same Run the result and the cards use; the whole run, decimated,
        # replaces the rolled-over live series
        series = series_of(which, ev)
        for side, name in series.items():
            # (one side: the no-argument form, which a followed log answers too)
            run = ev.to_run() if len(series) == 1 else ev.to_run(side)
            data = steps_data(run, max_points=LIVE_ROLLOVER)
            self.step_src[name].data = {"step": data["step"], "step_ms": data["step_ms"]}
            # live, a first step is read before its set-up is added: the final value now
            self.startup_src[name].data = startup_data(run, name)
        self._resync()
        if error is not None:
            what = (
                "interrupted"
                if isinstance(error, KeyboardInterrupt)
                else f"failed: {type(error).__name__}: {error}"
            )
            self.set_status(
                f"{'interleaved pair' if which == 'pair' else which + ' run'} {what} after "
                f"{ev.total_steps} steps (partial run kept)",
                "#c62828",
            )
            self.widget.add_class("loadeval-failed")

    def _resync(self) -> None:
        """Write the live figures into the widget's state after a change made outside a push,
        so a re-render (page reload, the saved widget state) shows it too."""
        if self.live_view is not None:
            self.live_view.update_from_model(self.live_layout)

    def progress(self, text: str) -> None:
        self.set_status(text)

    # -- after a pair ----------------------------------------------------------------
    def pair_done(self, result: PairResult) -> None:
        """Show the verdict and add a history row."""
        self.verdict.remove_class("loadeval-stale")
        self.widget.remove_class("loadeval-running")
        d = result.diagnosis
        if d is not None:
            self.verdict.value = verdict_html(d, config=pair_config(result))
        done = done_status(result)
        if done is not None:
            self.set_status(*done)
        self.advised_sweep = advised_sweep(d.facts()) if d is not None else None
        if self._panel is not None:
            self._panel.suggest_sweep(self.advised_sweep)
        self.add_history([result.row()])

    def add_history(self, rows: list[HistoryRow]) -> None:
        """Add rows to the history table and chart (a pair just run, or an imported history)."""
        self.rows.extend(rows)
        self.history.value = history_html(self.rows)
        factors, data = history_data(self.rows)
        self.hist_fig.x_range.factors = factors
        self.hist_src.data = data
        if self.hist_view is not None:
            self.hist_view.update_from_model(self.hist_fig)
        self.history_box.layout.display = ""

    # -- after a ladder / during and after a sweep -------------------------------------
    def ladder_done(self, result: LadderResult) -> None:
        self.verdict.value = ladder_html(result)
        self.set_status(f"Done: {result.conclusion()}")

    def point_done(self, point: SweepPoint, result: SweepResult) -> None:
        """A sweep configuration finished: update the chart, the table and the status."""
        if self.sweep_fig is None:
            return
        rows = result.table()
        factors, measured, predicted = sweep_data(rows)
        doc = self.live_layout.document
        try:
            if doc is not None:
                doc.hold("combine")
            self.sweep_fig.x_range.factors = factors
            self.sweep_src["measured"].data = measured
            self.sweep_src["predicted"].data = predicted
            ideal = result.ideal_steps_per_s
            if ideal:
                self.sweep_src["ideal"].location = ideal
                self.sweep_src["ideal"].visible = True
        finally:
            if doc is not None:
                doc.unhold()
        self._resync()
        self.verdict.value = sweep_html(result)

    def sweep_done(self, result: SweepResult) -> None:
        self.verdict.value = sweep_html(result)
        self.set_status(f"Done: {result.recommendation()}")

    def set_panel(self, panel: Any) -> None:
        """Show the rerun panel (one view) under the verdict, replacing any view there; its
        sweep box offers what the verdict card recommends."""
        self.panel_box.children = (panel,)
        self._panel = getattr(panel, "rerun_panel", None)
        if self._panel is not None:
            self._panel.suggest_sweep(self.advised_sweep)

    def add_view(self, view: Any) -> None:
        """Show one more view under the verdict (a sweep's own dashboard, from the panel)."""
        self.panel_box.children = (*self.panel_box.children, view)

    def status_text(self) -> str:
        """What the status line says now, in words (no HTML: the saved copy's text)."""
        return getattr(self, "_status_text", "")

    def show_error(self, exc: BaseException) -> None:
        with self.errors:
            print(f"loadeval_nb: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self._pusher is not None:
            self._pusher.stop_event.set()
            self._pusher.join()
            self._pusher = None


def done_status(result: PairResult) -> Optional[tuple[str, str]]:
    """The status line once a pair is done, and its colour (None: it failed, and its run
    said so)."""
    d = result.diagnosis
    if d is not None:
        disturbed = (
            f" Disturbed: other work ran during the {' and '.join(d.disturbed)} "
            f"run{'s' if len(d.disturbed) > 1 else ''}; rerun on a quiet machine."
            if d.disturbed
            else ""
        )
        lo, hi = d.speedup_ci
        gain = (  # a claim the size of its interval: a point only beside it
            f"an ideal loader would make steps between {fmt_times(lo)} and {fmt_times(hi)} as fast"
            if lo is not None and hi is not None
            else f"an ideal loader would be {fmt_times(d.speedup)} as fast"
        )
        return (
            f"Done: {d.verdict} — {gain}." + disturbed,
            DISTURBED_COLOR if d.disturbed else "#333",
        )
    if result.error is None:
        return f"Done: {result.failed or 'one run only'}; no comparison to make.", "#333"
    return None


def _plots(view: Any) -> W.Output:
    """``view`` (a Bokeh widget) in an ``Output`` of its own: where jupyter_bokeh's
    JavaScript is missing only this box fails, not the dashboard's box around it (ipywidgets
    would not build a box whose child's model cannot be made)."""
    out = W.Output()
    out.add_class("loadeval-plots")
    data = {**view._repr_mimebundle_(), "text/plain": ""}  # not the model's repr
    out.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
    out._loadeval_held = (view,)  # closed with the box (close_tree)
    return out


def gpu_notice() -> Optional[str]:
    """Initialise the GPU readings, holding back the line the core prints when there are
    none (the first time in a process: a dashboard's status line says why instead, not a
    red stderr box); why there are none (``"GPU: no NVIDIA driver found (...)"``) when that
    line was held back, else None."""
    with _held_log_lines() as held:
        reason = gpu_status()["reason"]
    return f"GPU: {reason}" if held and reason else None


@contextmanager
def _held_log_lines() -> Iterator[list[str]]:
    """What the ``loadeval_nb`` logger would print from this thread during the block:
    held back and collected."""
    held: list[str] = []
    me = threading.get_ident()

    def hold(record: logging.LogRecord) -> bool:
        if record.thread != me:
            return True
        held.append(record.getMessage())
        return False

    logger = logging.getLogger("loadeval_nb")
    logger.addFilter(hold)
    try:
        yield held
    finally:
        logger.removeFilter(hold)
