"""Widgets without a browser: the echo fix, throttling, bounded series, the static copy."""

from __future__ import annotations

import time

import pytest
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure
from jupyter_bokeh import BokehModel

from loadeval_nb import LoaderEvaluator, Run, diagnose
from loadeval_nb.core._shared import HistoryRow
from loadeval_nb.core.explore import PairResult
from loadeval_nb.viz import verdict_html
from loadeval_nb.viz._cards import history_html, pair_html
from loadeval_nb.viz._live import LIVE_ROLLOVER
from loadeval_nb.widgets import Dashboard
from loadeval_nb.widgets._bokeh import DisplayOnlyBokehModel
from loadeval_nb.widgets._pusher import MAX_PUSH_INTERVAL_S, Pusher, next_push_wait
from loadeval_nb.widgets._saved import static_bundle

MS = 1_000_000


def _echo(widget, src, rows):
    """What jupyter_bokeh's browser side sends back after applying a stream of `rows`."""
    content = {
        "event": "jsevent",
        "kind": "ColumnsStreamed",
        "model": {"id": src.id},
        "data": {"type": "map", "entries": [["x", rows]]},
        "rollover": None,
    }
    widget._sync_model(widget, content, [])


def _plot():
    src = ColumnDataSource({"x": []})
    p = figure()
    p.line("x", "x", source=src)
    return p, src


def test_browser_echo_of_streamed_rows_is_ignored():
    # regression for jupyter_bokeh 4.1.0: an echo applied again doubles the series
    p, src = _plot()
    w = DisplayOnlyBokehModel(p)
    src.stream({"x": [1, 2, 3]})
    _echo(w, src, [1, 2, 3])
    assert src.data["x"] == [1, 2, 3]
    w.close()
    w.close()  # idempotent (upstream's is not)


def test_the_upstream_model_does_apply_the_echo():
    # documents why DisplayOnlyBokehModel exists; if this starts failing, upstream fixed it.
    # jupyter_bokeh before 4.0.5 fails another way on the echo (an AssertionError on its
    # raw model): not applied twice, but an error in the kernel; ours drops it on every one
    p, src = _plot()
    w = BokehModel(p)
    src.stream({"x": [1, 2, 3]})
    try:
        _echo(w, src, [1, 2, 3])
    except AssertionError:
        from importlib.metadata import version

        release = tuple(int(x) for x in version("jupyter_bokeh").split(".")[:3])
        assert release < (4, 0, 5), release  # from 4.0.5 on: applied, not refused
        return
    assert len(src.data["x"]) == 6


class Slow:
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.sleep_s)
            yield i


def _count_streams(src, monkeypatch):
    calls = []
    orig = ColumnDataSource.stream

    def counting(self, *a, **k):
        if self is src:
            calls.append(1)
        return orig(self, *a, **k)

    monkeypatch.setattr(ColumnDataSource, "stream", counting)
    return calls


def test_pushes_are_throttled_and_all_steps_arrive(monkeypatch):
    dash = Dashboard(loader_name="x", steps_per_run=200, push_interval_s=0.25)
    calls = _count_streams(dash.step_src["real"], monkeypatch)
    ev = LoaderEvaluator(Slow(200, 0.005), sample_interval_s=0.05, label="real")
    dash.run_started("real", ev, 0, 2)
    t = time.monotonic()
    for _ in ev:
        pass  # 200 steps of ~5 ms: about 1 s
    elapsed = time.monotonic() - t
    dash.run_ended("real", ev, None)
    assert len(calls) <= elapsed / 0.25 + 2  # at most 4 pushes a second (+ the final one)
    assert len(calls) >= 2  # and it did stream while running
    # the first step is the start-up: a marker of its own; the line holds the 199 others
    assert dash.step_src["real"].data["step"] == list(range(1, 200))
    assert dash.startup_src["real"].data["step"] == [0]
    assert "step 200 of 200" in dash.status.value or "starting" not in dash.status.value


def test_push_wait_keeps_pushing_within_its_budget():
    # cheap pushes: the minimum interval rules
    assert next_push_wait(0.0005, 0.5, 0.0025) == 0.5
    # 5 ms a push at a 0.25 % budget: one push every 2 s
    assert next_push_wait(0.005, 0.5, 0.0025) == pytest.approx(2.0)
    # however slow a push, the plots still move
    assert next_push_wait(1.0, 0.5, 0.0025) == MAX_PUSH_INTERVAL_S
    assert next_push_wait(0.005, 0.5, 0.0) == 0.5  # no budget: the interval alone


def test_costly_pushes_are_spaced_out(monkeypatch):
    dash = Dashboard(loader_name="x", steps_per_run=None, push_interval_s=0.02, push_budget=0.05)
    ev = LoaderEvaluator(Slow(120, 0.01), sample_interval_s=None, label="real")

    def burn(self):  # a push costing ~10 ms of this thread's CPU
        t = time.thread_time()
        while time.thread_time() - t < 0.01:
            pass

    monkeypatch.setattr(Pusher, "_push", burn)
    dash.run_started("real", ev, 0, 1)
    pusher = dash._pusher
    t = time.monotonic()
    for _ in ev:
        pass  # ~1.2 s
    elapsed = time.monotonic() - t
    dash.run_ended("real", ev, None)
    # 10 ms a push at a 5 % budget: one push per ~0.2 s, not one per 0.02 s
    assert 2 <= pusher.pushes <= elapsed / 0.2 + 3
    assert pusher.cost_s == pytest.approx(0.01, rel=0.5)
    # each span covers its push (>= the 10 ms burnt), and the spans do not overlap
    spans = list(pusher.spans)
    assert all(p1 - p0 >= 9_000_000 for p0, p1 in spans)
    assert all(a1 <= b0 for (_, a1), (b0, _) in zip(spans, spans[1:]))


def test_long_runs_stay_bounded():
    dash = Dashboard(loader_name="x", steps_per_run=None, push_interval_s=60)
    ev = LoaderEvaluator(list(range(3 * LIVE_ROLLOVER)), sample_interval_s=None, label="real")
    dash.run_started("real", ev, 0, 1)
    for _ in ev:
        pass
    dash._pusher.push()  # one push of 15,000 new steps
    assert len(dash.step_src["real"].data["step"]) == LIVE_ROLLOVER
    dash.run_ended("real", ev, None)
    assert len(dash.step_src["real"].data["step"]) <= LIVE_ROLLOVER  # whole run, decimated


def _runs():
    def run_of(ms, mode):
        step = [int(ms * MS)] * 30
        return Run(
            mode=mode,
            start_ns=[i * step[0] for i in range(30)],
            step_ns=step,
            wait_ns=[s // 2 for s in step] if mode == "log" else None,
        )

    return run_of(20, "log"), run_of(10, "replay")


def test_verdict_card_and_history_table():
    real, ideal = _runs()
    card = verdict_html(diagnose(real, ideal))
    assert "INPUT-BOUND" in card and "2.00×" in card and "<script" not in card
    table = history_html(
        [
            HistoryRow(label="#1", real_step_s=0.02, ideal_step_s=0.01, speedup=2.0),
            HistoryRow(label="#2", num_workers=4),
        ]
    )
    assert table.count("loadeval-history-row") == 2 and "20.0 ms" in table


def test_static_copy_has_card_chart_and_history():
    real, ideal = _runs()
    result = PairResult(
        label="#1", loader_settings={}, real=real, ideal=ideal, diagnosis=diagnose(real, ideal)
    )
    bundle = static_bundle(
        "cls-1", [(pair_html(result, [result.row()]), "text report"), ("<p>more</p>", "more")]
    )
    html = bundle["text/html"]
    assert html.startswith("<div class='cls-1'>") and "<svg" in html and "polyline" in html
    assert "loadeval-verdict" in html and "loadeval-history-row" in html
    assert html.index("loadeval-history-row") < html.index("<p>more</p>")  # cards in turn
    assert bundle["text/plain"] == "text report\n\nmore"


def test_dashboard_marks_a_failed_run():
    dash = Dashboard(loader_name="x", steps_per_run=10, live=False)
    ev = LoaderEvaluator([1, 2, 3], sample_interval_s=None)
    dash.run_started("real", ev, 0, 2)
    list(ev)
    dash.run_ended("real", ev, ZeroDivisionError("boom"))
    assert "failed: ZeroDivisionError: boom" in dash.status.value
    assert "loadeval-failed" in dash.widget._dom_classes


@pytest.mark.parametrize("live", [True, False])
def test_no_gpu_util_plot_says_so(live):
    dash = Dashboard(loader_name="x", steps_per_run=10, live=live)
    assert "no NVIDIA GPU readings" in dash.util_fig.title.text
    assert "gpu_pct" not in dash.util_src["real"].data


def test_bokehjs_is_sent_inline_then_emptied():
    # regression: Bokeh's default CDN resources fail offline and the widget needs BokehJS
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    from loadeval_nb.widgets import load_bokehjs
    from loadeval_nb.widgets._bokeh import unload_bokehjs_output

    cfg = Config()
    cfg.HistoryManager.enabled = False
    InteractiveShell.instance(config=cfg)
    with capture_output() as cap:
        handle = load_bokehjs()
    data = cap.outputs[0].data
    js = data["application/vnd.bokehjs_load.v0+json"]
    assert "application/javascript" not in data  # sent once, not twice
    assert len(js) > 1_000_000 and "cdn.bokeh.org" not in js
    with capture_output() as cap2:
        unload_bokehjs_output(handle)
    assert handle is not None
    assert cap2.outputs == [] or all("bokehjs" not in str(o.data) for o in cap2.outputs)


def test_pusher_paces_itself_by_the_measured_cost_of_a_push():
    # injected clocks: no sleeping, exact numbers
    def counter(step, start=0):
        t = [start]

        def clock():
            t[0] += step
            return t[0]

        return clock

    dash = Dashboard(
        loader_name="x", steps_per_run=3, live=False, push_interval_s=0.5, push_budget=0.0025
    )
    ev = LoaderEvaluator([1, 2, 3], sample_interval_s=None, clock=counter(1_000_000))
    list(ev)
    pusher = Pusher(
        dash,
        "real",
        ev,
        "Run 1 of 2",
        clock=counter(2.5, start=-2.5),  # 0 at the start, 2.5 s at the first push
        cpu_clock=counter(0.005),  # each push costs 5 ms of CPU
        stamp=counter(1000),
    )
    assert pusher.next_wait() == 0.5  # no push measured yet: the interval
    pusher.push()
    assert pusher.cost_s == pytest.approx(0.005) and pusher.pushes == 1
    assert pusher.next_wait() == pytest.approx(2.0)  # 5 ms at 0.25 % of a core
    assert list(pusher.spans) == [(1000, 2000)]
    first, *rest = [s / 1e6 for s in ev.to_run().step_ns]
    assert dash.step_src["real"].data["step_ms"] == rest
    assert dash.startup_src["real"].data["step_ms"] == [first]
    assert "Run 1 of 2: step 3 of 3, 2.5 s elapsed" in dash.status.value
    pusher.push()  # nothing new: no rows, the same count
    assert dash.step_src["real"].data["step"] == [1, 2] and pusher.pushes == 2


def test_ranks_view_shows_each_rank():
    from bokeh.models import ColumnDataSource

    from loadeval_nb.core.ranks import RankResult
    from loadeval_nb.core.ranks.skew import ranks_result
    from loadeval_nb.widgets import ranks_view

    real, ideal = _runs()
    report = ranks_result([RankResult(r, "h", real.to_dict(), ideal.to_dict()) for r in range(2)])
    view = ranks_view(report)
    card, plot = view.children
    assert "loadeval-ranks-table" in card.value and card.value.count("loadeval-ranks-row") == 2
    names = {m.name for m in plot._model.select({"type": ColumnDataSource})}
    assert {"steps_real r0", "steps_real r1", "steps_ideal r0", "steps_ideal r1"} <= names
    plot.close()


# ---- issue 14, item 5: a dashboard that behaves like Jupyter ---------------------------------


def test_the_no_gpu_line_goes_to_the_status_line_once_not_to_stderr(monkeypatch, capsys):
    import sys

    import loadeval_nb.core.measure.readers as readers

    monkeypatch.setattr(readers, "_nvml_state", {})  # a fresh process: NVML not tried yet
    monkeypatch.setitem(sys.modules, "pynvml", None)  # and no NVML to find
    first = Dashboard(loader_name="x", steps_per_run=10, live=False)
    assert "pynvml is not installed" in first.status.value  # quietly, in the status line
    first.set_status("Run 1 of 2: step 3 of 10")
    assert "loadeval-note" in first.status.value and "pynvml" in first.status.value
    second = Dashboard(loader_name="y", steps_per_run=10, live=False)
    assert second.note is None and "pynvml" not in second.status.value  # once
    assert capsys.readouterr().err == ""  # no red stderr box


def test_a_new_pair_clears_the_plots_and_dims_the_verdict_until_its_own():
    real, ideal = _runs()
    dash = Dashboard(loader_name="x", steps_per_run=30)
    result = PairResult(label="#1", loader_settings={}, diagnosis=diagnose(real, ideal))
    dash.pair_done(result)
    dash.step_src["real"].stream({"step": [0, 1], "step_ms": [1.0, 2.0]})
    dash.util_src["ideal"].stream({"t_s": [0.1], "process_cpu_pct": [50], "workers_cpu_pct": [0]})
    dash.pair_starting("#2 num_workers=1 c4")  # "Rerun pair"
    assert all(
        not v
        for src in (*dash.step_src.values(), *dash.util_src.values())
        for v in src.data.values()
    )
    assert "loadeval-stale" in dash.verdict._dom_classes
    assert "loadeval-running" in dash.widget._dom_classes
    assert ".loadeval-stale{opacity:0.35}" in dash.style.value  # the CSS that dims it
    ev = LoaderEvaluator([1, 2], sample_interval_s=None)
    dash.run_started("real", ev, 0, 2)
    assert "#2 num_workers=1 c4: run 1 of 2 (real loader): starting" in dash.status.value
    list(ev)
    ev.close()
    dash.run_ended("real", ev, None)  # its pusher stops
    dash.pair_done(result)
    assert "loadeval-stale" not in dash.verdict._dom_classes
    assert "loadeval-running" not in dash.widget._dom_classes


def test_the_saved_copy_stands_in_where_the_dashboard_cannot_render():
    dash = Dashboard(loader_name="x", steps_per_run=10)
    assert dash.uid in dash.widget._dom_classes
    # the dashboard hides the copy unless one of its plots failed (a reloaded page)
    assert f"body:not(:has(.{dash.uid} .jupyter-widgets-error-widget)) " in dash.style.value
    assert f".{dash.static_class}{{display:none}}" in dash.style.value
    pending = dash.saved_copy([])
    assert "the run had not finished" in pending["text/html"]
    assert "the run had not finished" in pending["text/plain"]
    done = dash.saved_copy([("<p class='card'>verdict</p>", "verdict")])
    html = done["text/html"]
    assert "<p class='card'>verdict</p>" in html and "not finished" not in html
    assert done["text/plain"] == "verdict"
    # the copy hides this cell's widget outputs that did not render, and if a plot failed
    # the plots and the verdict (the copy has both), not the status line or the panel;
    # no script
    assert html.startswith("<style>") and "<script" not in html
    assert f".jp-OutputArea:has(.{dash.static_class}) .jp-OutputArea-output.lm-Panel" in html
    assert f".{dash.uid} .loadeval-plots:has(.jupyter-widgets-error-widget){{display:none}}" in html
    assert (
        f".{dash.uid}:has(.jupyter-widgets-error-widget) .loadeval-verdict-box{{display:none}}"
        in html
    )
    assert f".{dash.uid}:has(.jupyter-widgets-error-widget){{" not in html


def test_the_pusher_sends_under_the_request_that_started_it():
    # ipykernel keeps the request being handled (the parent header of what is sent) in a
    # context variable; a plain thread would not see the cell's
    import contextvars

    parent = contextvars.ContextVar("parent", default="none")
    parent.set("the cell")
    seen = []

    class Dash:
        step_src, util_src, steps_per_run = {}, {}, 3
        push_interval_s, push_budget, live_layout = 0.01, 0.0, figure()

        def set_status(self, text):
            seen.append(parent.get())

    ev = LoaderEvaluator([1, 2, 3], sample_interval_s=None)
    pusher = Pusher(Dash(), "real", ev, "Run 1")
    parent.set("a widget message handled since")
    pusher.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    pusher.stop()
    assert seen and set(seen[:-1]) == {"the cell"}  # the last push ran in this thread


def test_the_browser_s_messages_to_plots_and_buttons_go_to_the_main_shell():
    from loadeval_nb.widgets import RerunPanel
    from loadeval_nb.widgets._comms import on_main_shell

    class Comm:  # ipykernel 7.4's comm: routes the browser's replies to a subshell
        def _reply_subshell_for(self, data, default):
            return "the widgets' subshell"

    class Widget:
        comm = Comm()

    w = Widget()
    on_main_shell(w)
    assert w.comm._reply_subshell_for({}, "the widgets' subshell") is None  # the main shell
    on_main_shell(object())  # no comm (no kernel): nothing to do
    panel = RerunPanel({"num_workers": 0}, 4, lambda changes, cache: None)
    panel.set_busy(True)
    assert panel.button.disabled and "kernel is busy" in panel.busy_note.value
    assert "loadeval-busy" in panel.widget._dom_classes
    panel.set_busy(False)
    assert not panel.button.disabled and panel.busy_note.value == ""
    assert "loadeval-busy" not in panel.widget._dom_classes


def test_close_tree_closes_layouts_and_styles_too():
    import ipywidgets as W

    from loadeval_nb.widgets._follow import close_tree

    inner = W.Button(description="b")
    box = W.VBox([W.HTML("x"), W.HBox([inner])])
    held = [box, inner, inner.layout, inner.style, box.layout, box.children[0].style]
    close_tree(box)
    assert all(w.comm is None for w in held)


def test_the_lines_shown_are_the_arms_the_pass_serves():
    """The session gives the dashboard a line for every arm a pass could serve; which of
    them it serves is the plan's word, read from the pass: a loader without workers has no
    contended arm, and its line (and legend entry) is hidden, not drawn empty."""
    dash = Dashboard(
        loader_name="x", steps_per_run=40, live=False, runs=("real", "ideal", "contended")
    )
    ev = LoaderEvaluator(list(range(200)), mode="pair", steps=40, warmup=4, num_cached_batches=4)
    assert ev.sides == ("real", "ideal")  # no workers: no contended arm in the plan
    dash.pair_starting()
    dash.run_started("pair", ev, 0, 1)
    by_source = {id(src): name for name, src in dash.step_src.items()}
    shown = {
        by_source[id(r.data_source)]: r.visible
        for r in dash.step_fig.renderers
        if id(getattr(r, "data_source", None)) in by_source
    }
    assert shown == {"real": True, "ideal": True, "contended": False}
    legend = {item.label["value"]: item.visible for item in dash.step_fig.legend[0].items}
    assert legend == {"real": True, "ideal": True, "contended": False}
    util = [
        r.visible for r in dash.util_fig.renderers if r.data_source is dash.util_src["contended"]
    ]
    assert util and not any(util)
    dash.run_ended("pair", ev, None)
    ev.close()
