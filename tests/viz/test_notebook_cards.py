"""What the notebook's charts and cards show (issue 20, item 4): the start-up step apart
from the steps' scale, the CPU legend inside its plot, a disturbed pair's badge, the saved
card's configuration and alignment, a history table that does not wrap."""

from __future__ import annotations

import dataclasses
import re

from bokeh.models import ColumnDataSource, DataRange1d, GlyphRenderer, Legend

from loadeval_nb import Run, diagnose
from loadeval_nb.core._shared import HistoryRow
from loadeval_nb.core.explore import PairResult, RunSettings
from loadeval_nb.viz import plot_comparison, steps_svg, verdict_html
from loadeval_nb.viz._cards import config_words, history_html, pair_html
from loadeval_nb.viz._data import startup_data, startup_indices, steps_data
from loadeval_nb.viz._live import live_step_figure, live_util_figure

MS = 1_000_000


def run_of(step_ms, mode="log", block=None):
    step = [int(s * MS) for s in step_ms]
    return Run(
        mode=mode,
        start_ns=[sum(step[:i]) for i in range(len(step))],
        step_ns=step,
        block=block or [],
        wait_ns=[s // 2 for s in step] if mode == "log" else None,
    )


def _renderer_of(p, source):
    return next(r for r in p.renderers if isinstance(r, GlyphRenderer) and r.data_source is source)


# ---- the start-up step ----------------------------------------------------------------------


def test_each_epoch_s_first_step_is_the_start_up_and_not_on_the_line():
    run = run_of([1250, 100, 101, 99, 900, 102, 98], block=[0, 0, 0, 0, 1, 1, 1])
    assert startup_indices(run) == [0, 4]
    assert steps_data(run) == {"step": [1, 2, 3, 5, 6], "step_ms": [100, 101, 99, 102, 98]}
    up = startup_data(run, "real")
    assert up["step"] == [0, 4] and up["step_ms"] == [1250, 900]
    assert up["text"] == ["real first step 1.25 s", "real first step 900.0 ms"]
    assert startup_indices(run_of([])) == [] and steps_data(run_of([]))["step"] == []


def test_an_epoch_that_did_not_start_the_loader_keeps_its_first_step_on_the_line():
    # the blocks of an interleaved pair are epochs of one loader start: no set-up of their own
    run = run_of([1250, 100, 101, 99, 102, 98], block=[0, 0, 0, 1, 1, 1])
    run.blocks = [{"steps": 3, "setup_ns": 5 * MS}, {"steps": 3, "setup_ns": 0}]
    assert startup_indices(run) == [0]
    assert steps_data(run)["step"] == [1, 2, 3, 4, 5]
    run.blocks[1]["setup_ns"] = 3 * MS  # a second iter(): a start-up again
    assert startup_indices(run) == [0, 3]


def test_the_live_step_axis_follows_the_lines_only():
    p, lines, startups = live_step_figure()
    assert isinstance(p.y_range, DataRange1d) and p.y_range.start == 0
    # the axis is computed from the step lines alone; the start-up markers have their own
    assert set(p.y_range.renderers) == {_renderer_of(p, src) for src in lines.values()}
    for name, src in startups.items():
        marker = _renderer_of(p, src)
        assert marker.y_range_name == "startup" and marker not in p.y_range.renderers
        assert src.name == f"live_startup_{name}"
    assert p.extra_y_ranges["startup"].start == 0 and p.extra_y_ranges["startup"].end == 1


def test_the_report_s_step_axis_follows_the_steps_too():
    layout = plot_comparison(run_of([1250] + [100] * 29), run_of([40] + [10] * 29, "replay"))
    src = {m.name: m for m in layout.select({"type": ColumnDataSource}) if m.name}
    assert 1250 not in src["steps_real"].data["step_ms"]
    assert src["startup_real"].data["step_ms"] == [1250]
    fig = next(
        f for f in layout.children if getattr(f, "title", None) and "per step" in f.title.text
    )
    steps = {_renderer_of(fig, src["steps_real"]), _renderer_of(fig, src["steps_ideal"])}
    assert steps <= set(fig.y_range.renderers)
    assert _renderer_of(fig, src["startup_real"]) not in fig.y_range.renderers


def test_the_saved_chart_is_scaled_by_the_steps_not_the_start_up():
    svg = steps_svg([("real", run_of([1250] + [100] * 29)), ("ideal", None)])
    ticks = [float(t) for t in re.findall(r'text-anchor="end">([0-9.]+)</text>', svg)]
    assert max(ticks) <= 200  # 100 ms steps set the scale; the 1,250 ms start-up would not fit
    assert svg.count('class="startup"') == 1 and "first step 1.25 s" in svg


def test_the_cpu_legend_sits_above_the_frame_inside_the_plot():
    for gpu in (False, True):
        p, _ = live_util_figure(gpu)
        assert not [x for x in p.right if isinstance(x, Legend)]
        (legend,) = [x for x in p.above if isinstance(x, Legend)]
        assert legend.orientation == "horizontal" and legend.ncols == (3 if gpu else 2)


# ---- the cards ------------------------------------------------------------------------------


def _pair(label="#2 num_workers=1 c20", disturbed=()):
    real, ideal = run_of([20] * 30), run_of([10] * 30, "replay")
    d = dataclasses.replace(diagnose(real, ideal), disturbed=list(disturbed))
    return PairResult(
        label=label,
        loader_settings={"num_workers": 1, "pin_memory": True, "prefetch_factor": 2},
        real=real,
        ideal=ideal,
        diagnosis=d,
        settings=RunSettings(num_cached_batches=20),
    )


def test_a_disturbed_pair_has_a_badge_beside_its_verdict():
    card = verdict_html(_pair(disturbed=["real", "ideal"]).diagnosis)
    assert "loadeval-disturbed" in card and ">DISTURBED</span>" in card
    assert "other work ran during the real and ideal runs" in card
    assert card.index("INPUT-BOUND") < card.index("DISTURBED")
    assert "DISTURBED" not in verdict_html(_pair().diagnosis)


def test_the_saved_card_says_which_configuration_it_holds_and_aligns_left():
    result = _pair()
    card = pair_html(result, [result.row()])
    assert (
        "Configuration: num_workers=1 · pin_memory · cache 20 "
        "(history row #2 num_workers=1 c20)" in card
    )
    # JupyterLab right-aligns the cells of an HTML output unless each says otherwise
    cells = re.findall(r"<t[dh] style='([^']*)'", card)
    assert cells and all("text-align:left" in c for c in cells)


def test_config_words_leave_out_what_a_loader_does_not_have():
    assert config_words(HistoryRow(label="x", num_cached_batches=20)) == "cache 20"
    row = HistoryRow(
        label="x",
        num_workers=4,
        pin_memory=False,
        prefetch_factor=4,
        persistent_workers=True,
        num_cached_batches=8,
    )
    assert config_words(row) == "num_workers=4 · prefetch_factor=4 · persistent_workers · cache 8"


def test_the_history_table_never_wraps_and_scrolls_in_its_own_box():
    rows = [
        HistoryRow(
            label="#2 num_workers=1 c20",
            num_workers=1,
            num_cached_batches=20,
            real_step_s=0.0979,
            ideal_step_s=0.01,
            speedup=9.79,
            verdict="PARTLY INPUT-BOUND",
        )
    ]
    table = history_html(rows)
    assert table.startswith(
        "<div class='loadeval-history-box' style='max-width:100%;overflow-x:auto'>"
    )
    cells = re.findall(r"<t[dh] style='([^']*)'", table)
    assert cells and all("white-space:nowrap" in c for c in cells)
    assert (
        "<td style='" in table
        and ">97.9 ms</td>" in table
        and ">num_workers=1 · cache 20<" in table
    )
