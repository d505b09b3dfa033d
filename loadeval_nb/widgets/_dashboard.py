"""The live dashboard: status line, streamed Bokeh plots, verdict card, rerun panel, history.

Threads: the training loop only appends stamps (the core's C-level iterators);
one pusher thread per run, the only code touching the Bokeh documents while a
run goes, reads what is new and streams just those rows. It budgets itself: it
waits at least ``push_interval_s`` (0.5 s by default: at most 2 pushes a second)
and, when a push costs more than that allows, longer, so that pushing uses at most
``push_budget`` of one core (0.25 % by default; never less often than every
``MAX_PUSH_INTERVAL_S``). Series roll over at ``LIVE_ROLLOVER`` points; when a run
ends its plot is replaced by the whole run, decimated.
"""

from __future__ import annotations

import html
import itertools
import logging
import threading
import time
from collections import deque
from typing import Any, Optional

import ipywidgets as W
from bokeh.layouts import column

from ..core import Diagnosis, LoaderEvaluator, gpu_status
from ..core._format import fmt_pct, fmt_seconds
from ..core._ladder import LadderResult
from ..core._pair import PairResult
from ..core._sweep import SweepHooks, SweepPoint, SweepResult
from ..viz._comparison import COLORS
from ..viz._data import steps_data
from ..viz._live import (
    LIVE_ROLLOVER,
    RUNS,
    history_data,
    history_figure,
    live_step_figure,
    live_util_figure,
    sweep_data,
    sweep_figure,
)
from ..viz._svg import bars_svg, steps_svg
from ._bokeh import DisplayOnlyBokehModel

__all__ = [
    "Dashboard",
    "verdict_html",
    "history_html",
    "static_bundle",
    "ladder_html",
    "sweep_html",
    "pair_html",
]

log = logging.getLogger("loadeval_nb")
_ids = itertools.count(1)

VERDICT_COLORS = {
    "INPUT-BOUND": "#c62828",
    "PARTLY INPUT-BOUND": "#ef6c00",
    "NOT INPUT-BOUND": "#2e7d32",
    "NOT ENOUGH DATA": "#616161",
}

MAX_PUSH_INTERVAL_S = 3.0
"""However costly a push, the live plots move at least this often."""


def next_push_wait(cpu_per_push_s: float, min_interval_s: float, budget: float) -> float:
    """Seconds to wait before the next push so that pushing uses at most ``budget`` of one
    core (a push costing ``cpu_per_push_s``), within [``min_interval_s``, MAX_PUSH_INTERVAL_S]."""
    want = cpu_per_push_s / budget if budget > 0 else min_interval_s
    return max(min_interval_s, min(MAX_PUSH_INTERVAL_S, want))


def _x(v: Optional[float], digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}×"


def verdict_html(d: Diagnosis) -> str:
    """The verdict card (plain HTML, no scripts: also used in the saved notebook)."""
    color = VERDICT_COLORS.get(d.verdict, "#333")
    lo, hi = d.speedup_ci
    ci = f"{lo:.2f}–{hi:.2f}×" if lo is not None and hi is not None else "n/a"
    gpu = (
        "n/a (no NVIDIA GPU readings)"
        if d.real_gpu_util_pct is None and d.ideal_gpu_util_pct is None
        else f"{'n/a' if d.real_gpu_util_pct is None else f'{d.real_gpu_util_pct:.0f}%'} real → "
        f"{'n/a' if d.ideal_gpu_util_pct is None else f'{d.ideal_gpu_util_pct:.0f}%'} ideal"
    )
    saved = (
        f"{fmt_seconds(max(d.time_saved_per_epoch_s, 0.0))} of {fmt_seconds(d.real_epoch_s)} "
        f"({d.steps_per_epoch} steps)"
        if d.time_saved_per_epoch_s is not None
        else "n/a"
    )
    rows = [
        ("Speedup with an ideal loader", f"<b>{_x(d.speedup)}</b> (95% CI {ci})"),
        ("Headroom", fmt_pct(d.headroom, 1)),
        (
            "Mean step: real → ideal",
            f"{fmt_seconds(d.real_step_s)} → {fmt_seconds(d.ideal_step_s)}",
        ),
        (
            "Median / p90 step (real)",
            f"{fmt_seconds(d.real_median_s)} / {fmt_seconds(d.real_p90_s)}",
        ),
        (
            "Waiting for data (real)",
            f"{fmt_pct(d.wait_share)} of the time, {fmt_seconds(d.real_wait_s)} per step",
        ),
        ("Time saved per epoch", saved),
        ("GPU utilisation", gpu),
        ("Steady steps measured", f"{d.real_steady_steps} real, {d.ideal_steady_steps} ideal"),
    ]
    if d.prediction:
        rows.append(
            ("Simulator", f"<span class='loadeval-prediction'>{html.escape(d.prediction)}</span>")
        )
    body = "".join(
        f"<tr><td style='padding:1px 12px 1px 0;color:#555'>{k}</td><td>{v}</td></tr>"
        for k, v in rows
    )
    return _card(
        f"<div style='font-size:15px;margin-bottom:4px'><span style='background:{color};color:white;"
        f"padding:2px 8px;border-radius:4px;font-weight:bold'>{html.escape(d.verdict)}</span> "
        f"{html.escape(d.reason)}.</div><table>{body}</table>{_notes(d.notes)}",
        "loadeval-verdict",
    )


HISTORY_COLUMNS = (
    ("label", "run"),
    ("num_workers", "num_workers"),
    ("pin_memory", "pin_memory"),
    ("prefetch_factor", "prefetch_factor"),
    ("persistent_workers", "persistent_workers"),
    ("cache", "cache"),
    ("real_step_s", "real step"),
    ("ideal_step_s", "ideal step"),
    ("speedup", "speedup"),
    ("verdict", "verdict"),
)


def history_html(rows: list[dict[str, Any]]) -> str:
    """The history table: settings → real step, ideal step, speedup."""

    def cell(k: str, v: Any) -> str:
        if k.endswith("_step_s"):
            return fmt_seconds(v)
        if k == "speedup":
            return _x(v)
        return "–" if v is None else html.escape(str(v))

    return _table(
        [h for _, h in HISTORY_COLUMNS],
        [[cell(k, r.get(k)) for k, _ in HISTORY_COLUMNS] for r in rows],
        "loadeval-history",
        "loadeval-history-row",
    )


def pair_html(result: Optional[PairResult], rows: list[dict[str, Any]]) -> str:
    """A pair's card for the saved copy: verdict, SVG step-time chart, history (no scripts)."""
    parts = []
    if result is not None and result.diagnosis is not None:
        parts.append(verdict_html(result.diagnosis))
    if result is not None:
        runs = [
            (w, getattr(result, w).to_run() if getattr(result, w) is not None else None)
            for w in RUNS
        ]
        parts.append(steps_svg(runs))
    if rows:
        parts.append(history_html(rows))
    return "".join(parts)


def static_bundle(css_class: str, cards: list[tuple[str, str]]) -> dict[str, str]:
    """The output kept in the saved notebook: each (html, plain text) card in turn, under one
    heading, in a ``css_class`` div the live page hides (it shows the widgets instead)."""
    return {
        "text/html": f"<div class='{css_class}'><div style='font-family:sans-serif;font-size:12px;"
        "color:#777'>loadeval_nb result (static copy)</div>"
        + "".join(h for h, _ in cards)
        + "</div>",
        "text/plain": "\n\n".join(t for _, t in cards if t),
    }


class _Pusher(threading.Thread):
    """Streams what is new in one run to the plots and the status line, throttled."""

    def __init__(self, dash: Dashboard, which: str, ev: LoaderEvaluator, label: str) -> None:
        super().__init__(name="loadeval-dashboard", daemon=True)
        self.dash, self.which, self.ev, self.label = dash, which, ev, label
        self.stop_event = threading.Event()
        self.cursor: tuple[int, int] = (0, 0)
        self.n_steps = 0
        self.k_util = 0
        self.t_start = time.monotonic()
        self.failed = False
        self.cpu_s = 0.0  # CPU time this thread spent pushing
        self.pushes = 0
        self.cost_s: Optional[float] = None  # smoothed CPU time of one push
        # when each push ran (perf_counter_ns), and a switch to skip pushes: both for
        # bench/dashboard_overhead.py, which attributes step time to pushes
        self.spans: deque[tuple[int, int]] = deque(maxlen=4096)
        self.paused = False

    def run(self) -> None:
        wait = self.dash.push_interval_s
        while not self.stop_event.wait(wait):
            if not self.paused:
                self.push()
            if self.cost_s is not None:
                wait = next_push_wait(self.cost_s, self.dash.push_interval_s, self.dash.push_budget)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()
        self.push()  # whatever came after the last tick

    def push(self) -> None:
        t_cpu, t0 = time.thread_time(), time.perf_counter_ns()
        doc = self.dash.live_layout.document
        try:
            # everything new goes out as one combined patch (one comm message)
            if doc is not None:
                doc.hold("combine")
            self._push()
        except Exception as e:  # never break the user's run over a plot
            if not self.failed:
                self.failed = True
                log.warning("loadeval_nb: live plot update failed (%s); the run goes on.", e)
        finally:
            if doc is not None:
                doc.unhold()
            cost = time.thread_time() - t_cpu
            self.spans.append((t0, time.perf_counter_ns()))
            self.cpu_s += cost
            self.pushes += 1
            # smoothed, so one slow push (a big backlog) does not stall the plots
            self.cost_s = cost if self.cost_s is None else 0.7 * self.cost_s + 0.3 * cost

    def _push(self) -> None:
        steps, self.cursor = self.ev.steps_since(self.cursor)
        if steps:
            n0 = self.n_steps
            self.n_steps += len(steps)
            self.dash.step_src[self.which].stream(
                {"step": list(range(n0, self.n_steps)), "step_ms": [s / 1e6 for s in steps]},
                rollover=LIVE_ROLLOVER,
            )
        sampler, t0 = self.ev.util_sampler, self.ev.started_ns
        if sampler is not None and t0 is not None:
            data, self.k_util = sampler.since(self.k_util)
            if data["t_ns"]:
                src = self.dash.util_src[self.which]
                row = {"t_s": [(t - t0) / 1e9 for t in data.pop("t_ns")]}
                row.update({k: v for k, v in data.items() if k in src.data})
                src.stream(row, rollover=LIVE_ROLLOVER)
        steps = self.dash.steps_per_run
        of = " (adaptive stop)" if steps == "auto" else f" of {steps or '?'}"
        self.dash.set_status(
            f"{self.label}: step {self.n_steps}{of}, "
            f"{time.monotonic() - self.t_start:.1f} s elapsed"
        )


class Dashboard(SweepHooks):
    """The widget shown by ``%%loadeval``; also the hooks that feed it during a pair,
    a caching ladder (``runs`` = the rungs) or a sweep."""

    def __init__(
        self,
        *,
        loader_name: str,
        steps_per_run: Any,
        live: bool = True,
        push_interval_s: float = 0.5,
        push_budget: float = 0.0025,
        width: int = 900,
        runs: tuple[str, ...] = RUNS,
        sweep: bool = False,
    ) -> None:
        self.loader_name = loader_name
        self.steps_per_run = steps_per_run
        self.live = live
        self.push_interval_s = push_interval_s
        self.push_budget = push_budget
        self.uid = f"loadeval-{next(_ids)}-{int(time.time() * 1000) % 100000}"
        self.static_class = f"{self.uid}-static"
        self.gpu = bool(gpu_status()["available"])
        self.rows: list[dict[str, Any]] = []
        self._pusher: Optional[_Pusher] = None
        self.status = W.HTML(value=self._status_html("Starting…"))
        # Hides this dashboard's static copy while the live widget is on the page (saved
        # notebooks, where the widget cannot render, show the static copy instead).
        self.style = W.HTML(value=f"<style>.{self.static_class}{{display:none}}</style>")
        self.verdict = W.HTML(value="")
        self.history = W.HTML(value="")
        self.errors = W.Output()
        self.step_fig, self.step_src = live_step_figure(width=width, names=runs)
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
        self.live_layout = column(*figs)
        if live:
            self.live_view = DisplayOnlyBokehModel(self.live_layout)
            children.append(self.live_view)
        children += [self.verdict, self.errors]
        self.panel_box = W.VBox([])
        self.history_box = W.VBox([W.HTML("<b>History</b>"), self.history])
        if live:
            self.hist_view = DisplayOnlyBokehModel(self.hist_fig)
            self.history_box.children = (*self.history_box.children, self.hist_view)
        self.history_box.layout.display = "none"
        children += [self.panel_box, self.history_box]
        self.widget = W.VBox(children, layout=W.Layout(width=f"{width + 40}px"))
        self.widget.add_class("loadeval-dashboard")

    # -- status ------------------------------------------------------------------
    def _status_html(self, text: str, color: str = "#333") -> str:
        return (
            f"<div class='loadeval-status' style='font-family:monospace;font-size:13px;color:{color}'>"
            f"{html.escape(text)}</div>"
        )

    def set_status(self, text: str, color: str = "#333") -> None:
        self.status.value = self._status_html(text, color)

    # -- hooks: called by run_pair ------------------------------------------------
    def run_started(self, which: str, ev: LoaderEvaluator, index: int, total: int) -> None:
        what = {
            "real": "real loader",
            "ideal": "replayed cache",
            "device": "ladder: batches cached on the GPU",
            "host": "ladder: batches cached in host memory",
            "samples": "ladder: real loader over cached samples",
        }.get(which, which)
        if which == "real" and ev.label not in (None, "real"):
            what = f"real loader, {ev.label}"
        label = f"Run {index + 1} of {total} ({what})"
        self.set_status(f"{label}: starting")
        # a new pair starts: clear this run's series from the previous pair
        self.step_src[which].data = {k: [] for k in self.step_src[which].data}
        self.util_src[which].data = {k: [] for k in self.util_src[which].data}
        if self.live:
            self._pusher = _Pusher(self, which, ev, label)
            self._pusher.start()

    def run_ended(self, which: str, ev: LoaderEvaluator, error: Optional[BaseException]) -> None:
        if self._pusher is not None:
            self._pusher.stop()
            self._pusher = None
        run = ev.to_run()
        # the whole run, decimated, replaces the rolled-over live series
        data = steps_data(run, max_points=LIVE_ROLLOVER)
        self.step_src[which].data = {"step": data["step"], "step_ms": data["step_ms"]}
        self._resync()
        if error is not None:
            what = (
                "interrupted"
                if isinstance(error, KeyboardInterrupt)
                else f"failed: {type(error).__name__}: {error}"
            )
            self.set_status(
                f"{which} run {what} after {run.n_steps} steps (partial run kept)", "#c62828"
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
    def pair_done(self, result: PairResult, settings_row: dict[str, Any]) -> None:
        """Show the verdict and add a history row."""
        d = result.diagnosis
        if d is not None:
            self.verdict.value = verdict_html(d)
            self.set_status(
                f"Done: {d.verdict} — an ideal loader would be {_x(d.speedup)} as fast."
            )
        elif result.error is None:
            self.set_status(f"Done: {result.failed_run or 'one run only'}; no comparison to make.")
        row = {**result.row(), **settings_row}
        self.rows.append(row)
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
        self.panel_box.children = (panel,)

    def show_error(self, exc: BaseException) -> None:
        with self.errors:
            print(f"loadeval_nb: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self._pusher is not None:
            self._pusher.stop_event.set()
            self._pusher.join()
            self._pusher = None


def _table(head: list[str], rows: list[list[str]], css: str, row_css: str) -> str:
    th = "".join(f"<th style='text-align:left;padding:2px 8px'>{h}</th>" for h in head)
    body = "".join(
        f"<tr class='{row_css}'>"
        + "".join(f"<td style='padding:2px 8px'>{c}</td>" for c in r)
        + "</tr>"
        for r in rows
    )
    return (
        f"<table class='{css}' style='border-collapse:collapse;font-family:sans-serif;font-size:12px'>"
        f"<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    )


def _ms_or(seconds: Optional[float], text: str) -> Any:
    return text if seconds is None else seconds * 1e3


def _notes(notes: Any) -> str:
    return "".join(f"<div style='color:#555'>note: {html.escape(n)}</div>" for n in notes)


def _card(inner: str, css: str) -> str:
    return (
        f"<div class='{css}' style='border:1px solid #ddd;border-radius:6px;padding:8px 12px;"
        f"margin:4px 0;font-family:sans-serif;font-size:13px'>{inner}</div>"
    )


def ladder_html(result: LadderResult) -> str:
    """The ladder's card: one row per rung, the stage each adds, the conclusion, a bar chart."""
    rows = []
    for r in result.table():
        if r["skipped"]:
            rows.append(
                [r["rung"], html.escape(r["title"]), "skipped", "", html.escape(r["skipped"])]
            )
            continue
        add = ""
        if r["added_s"] is not None:
            add = f"+{fmt_seconds(r['added_s'])} {html.escape(r['adds'] or '')}"
            if not r["significant"]:
                add += " <i>(within noise or under 5%)</i>"
        rate = f"{r['samples_per_s']:,.0f}/s" if r["samples_per_s"] else "n/a"
        rows.append([r["rung"], html.escape(r["title"]), fmt_seconds(r["mean_step_s"]), rate, add])
    table = _table(
        ["rung", "the loop gets", "mean step", "samples/s", "adds over the rung above"],
        rows,
        "loadeval-ladder-table",
        "loadeval-ladder-row",
    )
    bars = [
        (
            r["rung"],
            "skipped" if r["skipped"] else _ms_or(r["mean_step_s"], "no steps"),
            COLORS.get(r["rung"], "#333"),
        )
        for r in result.table()
    ]
    notes = _notes(result.notes)
    return _card(
        f"<div style='font-size:15px;margin-bottom:4px'><b>Caching ladder</b>: "
        f"{html.escape(result.conclusion())}</div>{table}"
        f"{bars_svg(bars, 'Mean step per rung (ms)', width=560)}{notes}",
        "loadeval-verdict loadeval-ladder",
    )


def sweep_html(result: SweepResult) -> str:
    """The sweep's card: measured vs predicted rate per configuration and the recommendation."""
    tab = result.table()
    rows = []
    for r in tab:
        if r["error"]:
            rows.append([html.escape(r["label"]), "failed", "", "", html.escape(r["error"])])
            continue
        rate = r["steps_per_s"]
        pred = r["predicted_steps_per_s"]
        noise = f"±{r['rel_ci']:.0%}" if r["rel_ci"] is not None else ""
        rows.append(
            [
                html.escape(r["label"]),
                "n/a" if rate is None else f"{rate:,.1f} {noise}",
                "n/a" if pred is None else f"{pred:,.1f}",
                fmt_pct(r["of_ideal"]) if r["of_ideal"] is not None else "n/a",
                f"{r['repeats']} run{'s' if r['repeats'] > 1 else ''}",
            ]
        )
    table = _table(
        ["configuration", "steps/s measured", "simulator", "of ideal", "runs"],
        rows,
        "loadeval-sweep-table",
        "loadeval-sweep-row",
    )
    ideal = result.ideal_steps_per_s
    drift = result.load_drift_note()
    notes = _notes([drift] if drift else [])
    bars = [(r["label"], "failed" if r["error"] else r["steps_per_s"], COLORS["real"]) for r in tab]
    svg = bars_svg(
        bars,
        "Steps/s per configuration (◆ simulator, dashed: ideal loader)",
        markers=[r["predicted_steps_per_s"] for r in tab],
        ceiling=ideal,
        width=560,
    )
    return _card(
        f"<div style='font-size:15px;margin-bottom:4px'><b>Sweep</b>: "
        f"<span class='loadeval-recommendation'>{html.escape(result.recommendation())}</span></div>"
        f"<div style='color:#555'>ideal loader: {'n/a' if ideal is None else f'{ideal:,.1f}'} steps/s</div>"
        f"{table}{svg}{notes}",
        "loadeval-verdict loadeval-sweep",
    )


def run_label(settings: dict[str, Any], n: int) -> str:
    """A short label for a configuration: '#2 w4 pin'."""
    parts = [f"#{n}"]
    if settings.get("num_workers") is not None:
        parts.append(f"w{settings['num_workers']}")
    if settings.get("pin_memory"):
        parts.append("pin")
    if settings.get("cache") is not None:
        parts.append(f"c{settings['cache']}")
    return " ".join(parts)
