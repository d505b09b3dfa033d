"""The html and text views without a browser: the html view grows through a display handle
while a run runs, within its CPU budget; the text view's line counts steps; no Bokeh widget
in either."""

from __future__ import annotations

import io
import re
import time

import pytest

from loadeval_nb import LoaderEvaluator
from loadeval_nb.widgets import RerunPanel
from loadeval_nb.widgets._bokeh import DisplayOnlyBokehModel
from loadeval_nb.widgets._html_view import HTML_PUSH_INTERVAL_S, HtmlDashboard, HtmlPusher
from loadeval_nb.widgets._pusher import next_push_wait
from loadeval_nb.widgets._text_view import TextDashboard

from ..timing import retry_once


class Slow:
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.sleep_s)
            yield i


class FakeHandle:
    """An IPython display handle that keeps what each update sent."""

    def __init__(self):
        self.updates = []

    def update(self, obj, raw=False):
        assert raw
        self.updates.append(obj)


def _points(bundle, series="real"):
    """How many points the SVG's polyline of ``series`` (by its colour) holds."""
    lines = re.findall(r'<polyline [^>]*points="([^"]*)"', bundle["text/html"])
    return max((len(p.split()) for p in lines), default=0)


def _widgets_in(widget):
    out, todo = [], [widget]
    while todo:
        w = todo.pop()
        out.append(w)
        todo.extend(getattr(w, "children", ()))
        todo.extend(getattr(w, "_loadeval_held", ()))
    return out


@pytest.mark.slow
@retry_once
def test_html_view_grows_through_its_display_handle_while_the_run_runs():
    # a budget that lets the pushes come every 0.2 s even where a push costs 10 ms of CPU
    # (a busy machine): at the default 0.25 % of a core, a 3 ms push waits 1.2 s, as long
    # as this run, and the drawing could not be seen to grow (the pacing has its own test)
    dash = HtmlDashboard(loader_name="x", steps_per_run=150, push_interval_s=0.2, push_budget=0.05)
    dash.handle = handle = FakeHandle()
    ev = LoaderEvaluator(Slow(150, 0.01), sample_interval_s=None, label="real")
    dash.run_started("real", ev, 0, 1)
    pusher = dash.pusher
    assert isinstance(pusher, HtmlPusher)
    seen = []
    t = time.monotonic()
    for k, _ in enumerate(ev):
        if k % 30 == 29:
            seen.append(len(handle.updates))
    elapsed = time.monotonic() - t
    during = list(handle.updates)
    dash.run_ended("real", ev, None)
    # it was drawn again while the loop ran, and each drawing held more steps
    assert seen[-1] > seen[0] >= 1
    counts = [int(m) for b in during for m in re.findall(r"step (\d+) of 150", b["text/plain"])]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] > counts[0]
    sizes = [_points(b) for b in during if "<polyline" in b["text/html"]]
    assert sizes and sizes == sorted(sizes) and sizes[-1] > sizes[0]
    # the whole run at the end: 149 steps on the line (the first is the start-up's marker)
    final = handle.updates[-1]
    assert _points(final) == 149 and 'class="startup"' in final["text/html"]
    assert dash.renders == len(handle.updates)
    # the pusher's own CPU time (thread time, as the bokeh pusher counts it) stays within
    # its budget, give or take the push the budget is learnt from
    assert pusher.cpu_s <= dash.push_budget * elapsed + 2 * pusher.cost_s + 0.002


def test_html_view_paces_itself_within_the_dashboard_budget():
    # a push measured on this thread's CPU clock, of a pair's worth of steps; the next push
    # waits so that pushing uses at most 0.25 % of a core, and never comes sooner than 1 s
    dash = HtmlDashboard(loader_name="x", steps_per_run=2000)
    assert dash.push_interval_s == HTML_PUSH_INTERVAL_S == 1.0
    assert dash.push_budget == 0.0025  # the bokeh dashboard's
    dash.handle = FakeHandle()
    ev = LoaderEvaluator(list(range(2000)), sample_interval_s=None, label="real")
    list(ev)
    pusher = HtmlPusher(dash, "real", ev, "Run 1 of 1")
    for _ in range(5):
        pusher.push()
    assert pusher.pushes == 5 and pusher.cost_s > 0 and not pusher.failed
    wait = pusher.next_wait()
    # paced by the costlier of the smoothed cost and the last push's (a drawing holds the
    # whole run: its cost only grows, and the smoothing lags behind it)
    cost = max(pusher.cost_s, pusher.last_cost_s)
    assert wait == next_push_wait(cost, 1.0, 0.0025)
    assert wait >= 1.0
    # the budget (to float rounding: cost / (cost / budget) may exceed it by an ulp), or
    # the slowest pace
    assert cost / wait <= 0.0025 * (1 + 1e-9) or wait == 3.0


def test_html_view_has_no_bokeh_widget_and_keeps_verdict_and_panel():
    dash = HtmlDashboard(loader_name="x", steps_per_run=10)
    dash.set_panel(RerunPanel({"num_workers": 0}, 4, lambda *a: None).widget)
    found = _widgets_in(dash.widget)
    assert not any(isinstance(w, DisplayOnlyBokehModel) for w in found)
    assert dash.verdict in found and dash.panel_box in found
    assert dash.status.layout.display == "none"  # the live output says it
    # before anything ran: the status line only, no chart
    bundle = dash.live_bundle()
    assert "Starting" in bundle["text/html"] and "<svg" not in bundle["text/html"]
    # without a live view, the widget's own status line shows
    quiet = HtmlDashboard(loader_name="x", steps_per_run=10, live=False)
    assert quiet.status.layout.display != "none"
    quiet.set_status("Run 1 of 2: starting")
    assert "Run 1 of 2: starting" in quiet.status.value


def test_the_bokeh_dashboard_s_plots_sit_apart_from_its_panel():
    from loadeval_nb.widgets import Dashboard

    dash = Dashboard(loader_name="x", steps_per_run=10)
    # the dashboard's box holds Outputs that show the plots, not the plots: where
    # jupyter_bokeh's JavaScript is missing, the box (status, verdict, panel) still renders
    assert not any(isinstance(w, DisplayOnlyBokehModel) for w in dash.widget.children)
    plots = [w for w in dash.widget.children if "loadeval-plots" in w._dom_classes]
    assert len(plots) == 1 and plots[0]._loadeval_held == (dash.live_view,)
    view_id = plots[0].outputs[0]["data"]["application/vnd.jupyter.widget-view+json"]
    assert view_id["model_id"] == dash.live_view.model_id


def test_text_view_says_each_run_in_one_line_that_updates():
    out = io.StringIO()
    dash = TextDashboard(loader_name="x", steps_per_run=60, push_interval_s=0.1, stream=out)
    ev = LoaderEvaluator(Slow(60, 0.01), sample_interval_s=None, label="real")
    dash.run_started("real", ev, 0, 2)
    for _ in ev:
        pass
    dash.run_ended("real", ev, None)
    text = out.getvalue()
    line, rest = text.split("\n", 1)
    assert rest == ""  # the run's line ended once, when the run did
    updates = line.split("\r")[1:]
    assert updates[0] == "Run 1 of 2 (real loader): starting"
    counts = [int(m) for u in updates for m in re.findall(r"step (\d+) of 60", u)]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] == 60
    # the last says the run is done: the steps the loop ran of those planned, the steady ones
    steady = len(ev.to_run().steady_step_s())
    assert 0 < steady < 60
    assert re.fullmatch(
        rf"Run 1 of 2 \(real loader\): done: 60 of 60 steps, {steady} of them steady, "
        r"\d+\.\d s elapsed *",
        updates[-1],
    ), updates[-1]
    # each update covers the one before it
    assert all(len(b) >= len(a) for a, b in zip(updates, updates[1:]))
    dash.say("Done: NOT INPUT-BOUND")
    assert out.getvalue().endswith("\nDone: NOT INPUT-BOUND\n")
    assert dash.saved_copy([]) is None
    assert dash.saved_copy([("<p>card</p>", "card")])["text/plain"] == "card"


def test_the_text_view_s_last_line_counts_the_pass_s_loop_steps_not_its_steady_ones():
    """An interleaved pass runs warm-up and drained steps besides the steady ones: its last
    line says every step the loop ran against the pass's plan, and each side's steady
    ones apart (the steady ones alone read as if the pass had stopped early)."""
    out = io.StringIO()
    dash = TextDashboard(loader_name="x", steps_per_run=60, push_interval_s=0.1, stream=out)
    ev = LoaderEvaluator(
        Slow(200, 0.0),
        mode="pair",
        steps=60,
        warmup=4,
        num_cached_batches=4,
        sample_interval_s=None,
    )
    dash.run_started("pair", ev, 0, 1)
    ran = sum(1 for _ in ev)
    ev.close()
    dash.run_ended("pair", ev, None)
    last = out.getvalue().split("\n")[0].split("\r")[-1].rstrip()
    steady = {s: len(r.steady_step_s()) for s, r in ev.to_runs().items()}
    assert ran == len(ev) and sum(steady.values()) < ran
    said, elapsed = last.rsplit(", ", 1)
    assert said == (
        f"Run 1 of 1 (real loader and replayed cache, interleaved): done: {ran} of {ran} "
        f"steps, {sum(steady.values())} of them steady (real {steady['real']}, "
        f"ideal {steady['ideal']})"
    ), last
    assert re.fullmatch(r"\d+\.\d s elapsed", elapsed), last


def test_the_text_view_counts_a_repeat_s_own_steps_and_a_loop_that_stopped_early():
    out = io.StringIO()
    dash = TextDashboard(loader_name="x", steps_per_run=20, live=False, stream=out)
    ev = LoaderEvaluator(Slow(20, 0.0), warmup=5, sample_interval_s=None, label="real")
    dash.run_started("real", ev, 0, 2)
    list(ev)
    dash.run_ended("real", ev, None)
    dash.run_started("real", ev, 1, 2)  # the same wrapper again: a repeat's second epoch
    for k, _ in enumerate(ev):
        if k == 11:
            break
    dash.run_ended("real", ev, None)
    first, second = out.getvalue().splitlines()
    # each epoch's first 5 steps are its warm-up (its first: its start-up)
    assert first == "Run 1 of 2 (real loader): done: 20 of 20 steps, 15 of them steady"
    # a break: the step it left is incomplete, not steady
    assert second == "Run 2 of 2 (real loader): done: 12 of 20 steps, 6 of them steady"


@pytest.mark.parametrize("view", [HtmlDashboard, TextDashboard])
def test_a_failed_run_says_so_in_every_view(view):
    out = io.StringIO()
    kw = {"stream": out} if view is TextDashboard else {}
    dash = view(loader_name="x", steps_per_run=10, **kw)
    if view is HtmlDashboard:
        dash.handle = FakeHandle()
    ev = LoaderEvaluator(list(range(10)), sample_interval_s=None, label="real")
    dash.run_started("real", ev, 0, 1)
    list(ev)
    dash.run_ended("real", ev, RuntimeError("boom"))
    said = out.getvalue() if view is TextDashboard else dash.handle.updates[-1]["text/plain"]
    assert "real run failed: RuntimeError: boom after 10 steps" in said
