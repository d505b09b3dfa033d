"""Every user-facing string is escaped exactly once where it meets HTML (the cards, the
report's Divs), and left as text where Bokeh writes text (titles, legends, axis factors,
tooltips): hostile labels show as typed, never run, never as ``&amp;lt;``."""

from __future__ import annotations

import html
import re

import pytest
from bokeh.models import ColumnDataSource, Title

from loadeval_nb import Run, diagnose, save_report
from loadeval_nb.core._shared import HistoryRow
from loadeval_nb.core.explore import SweepPoint, SweepResult
from loadeval_nb.core.verdict import Fact, Facts
from loadeval_nb.viz import bars_svg, verdict_html
from loadeval_nb.viz._cards import history_html, report_html, sweep_html
from loadeval_nb.viz._live import history_data, sweep_data

from .test_comparison import report_divs

MS = 1_000_000
HOSTILE = "<script>alert('x')</script> & <1% \"q\""
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;1% &quot;q&quot;"
TWICE = ("&amp;lt;", "&amp;amp;", "&amp;quot;", "&amp;#x27;")


def assert_escaped_once(html_text: str, times: int = 1) -> None:
    assert "<script" not in html_text and "<1%" not in html_text
    assert html_text.count(ESCAPED) >= times, html_text
    for twice in TWICE:
        assert twice not in html_text, twice


def run_of(step_ms, mode="log", wait_frac=0.5, label=None):
    step = [int(s * MS) for s in step_ms]
    return Run(
        mode=mode,
        start_ns=[sum(step[:i]) for i in range(len(step))],
        step_ns=step,
        wait_ns=[int(s * wait_frac) for s in step] if mode == "log" else None,
        label=label,
    )


def test_a_report_card_escapes_every_part():
    report = Facts(
        kind="verdict",
        title=HOSTILE,
        headline=HOSTILE,
        badge="INPUT-BOUND",
        facts=(Fact("speedup", HOSTILE, HOSTILE), Fact("x", "plain", HOSTILE)),
        columns=("configuration", HOSTILE),
        rows=((HOSTILE, HOSTILE),),
        notes=(HOSTILE,),
    )
    card = report_html(report)
    assert_escaped_once(card, times=8)
    # the text report is the same facts unescaped
    assert HOSTILE in report.text()


def test_a_small_share_is_written_escaped_in_the_verdict_card():
    d = diagnose(run_of([20] * 30, wait_frac=0.002), run_of([10] * 30, mode="replay"))
    assert "(<1% of the time)" in str(d)
    card = verdict_html(d)
    assert "(&lt;1% of the time)" in card and "<1%" not in card


def test_history_and_sweep_cards_escape_labels_once():
    table = history_html([HistoryRow(label=HOSTILE, verdict="<1%", real_step_s=0.02)])
    assert_escaped_once(table)
    assert "&lt;1%" in table

    points = [SweepPoint({"num_workers": 2}, HOSTILE, {}, runs=[run_of([2074] * 12)])]
    res = SweepResult("", {}, points=points, ideal=run_of([1000] * 12, mode="replay"))
    card = sweep_html(res)
    # the table row and the SVG bar's label, each escaped once
    assert_escaped_once(card, times=2)
    # steps/s with three significant figures, in the table and on the bar
    assert "'>0.482 ±" in card and ">0.482</text>" in card


def test_svg_values_and_labels_are_escaped():
    svg = bars_svg([(HOSTILE, "<skipped>", "#111"), ("a", 0.48212, "#111")], HOSTILE)
    assert "&lt;skipped&gt;" in svg and svg.count(ESCAPED) == 2
    assert not any(t in svg for t in TWICE)


def test_bokeh_text_is_left_as_text():
    # Bokeh draws titles, legends, axis factors and tooltip values as text: escaping them
    # would show "&lt;" to the user
    factors, data = history_data([HistoryRow(label=HOSTILE, real_step_s=0.02)])
    assert factors == [(HOSTILE, "real")]
    factors, measured, _ = sweep_data([{"label": HOSTILE, "steps_per_s": 0.48212}])
    assert factors == [HOSTILE] and measured["rate_text"] == ["0.482"]


def test_hostile_labels_and_title_in_the_report_are_escaped_once(tmp_path):
    out = save_report(
        run_of([20] * 20, wait_frac=0.002, label=HOSTILE),
        run_of([10] * 20, mode="replay"),
        tmp_path / "r.html",
        title=HOSTILE,
    )
    text = open(out, encoding="utf-8").read()
    assert "<script>alert" not in text  # not in the page, not in its embedded document
    title = re.search("<title>(.*)</title>", text).group(1)
    assert "<" not in title and html.unescape(title) == HOSTILE
    divs = report_divs(text)
    assert_escaped_once(divs["title"])
    assert_escaped_once(divs["verdict"])  # the run's label, in the line on what was compared
    assert "&lt;1% of the time" in divs["verdict"]


def test_bokeh_models_of_the_report_carry_plain_text():
    from loadeval_nb import plot_comparison

    layout = plot_comparison(run_of([20] * 20, label=HOSTILE), run_of([10] * 20, mode="replay"))
    names = {m.name for m in layout.select({"type": ColumnDataSource})}
    assert "steps_real" in names
    titles = [t.text for t in layout.select({"type": Title}) if t.text]
    assert titles and not any("&" in t for t in titles)


@pytest.mark.parametrize(
    "name",
    ["report_html", "verdict_html", "history_html", "pair_html", "ladder_html", "sweep_html"],
)
def test_the_notebook_and_the_report_share_one_card(name):
    # one renderer, one place: each card is defined once, in viz, and the widgets layer has none
    import pathlib

    import loadeval_nb
    import loadeval_nb.widgets as widgets
    from loadeval_nb.viz import _cards

    root = pathlib.Path(loadeval_nb.__file__).parent
    homes = [
        p.relative_to(root).as_posix()
        for p in sorted(root.rglob("*.py"))
        if f"def {name}(" in p.read_text()
    ]
    assert homes == ["viz/_cards.py"]
    assert callable(getattr(_cards, name))
    assert not hasattr(widgets, name)
