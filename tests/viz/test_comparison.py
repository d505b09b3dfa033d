"""plot_comparison and the HTML report."""

from __future__ import annotations

import errno
import html
import json
import os
import re

import pytest
from bokeh.models import ColumnDataSource, Plot

from loadeval_nb import LoadEvalError, Run, plot_comparison, save_report
from loadeval_nb.viz._data import decimate, hist_data, util_data

MS = 1_000_000


def run_of(step_ms, mode="log", util=None):
    step = [int(s * MS) for s in step_ms]
    return Run(
        mode=mode,
        start_ns=[sum(step[:i]) for i in range(len(step))],
        step_ns=step,
        wait_ns=[s // 2 for s in step] if mode == "log" else None,
        util=util,
    )


CPU_ONLY = {
    "t_ns": [0, 100 * MS, 200 * MS],
    "gpu": {"available": False, "util_pct": None, "reason": "no driver"},
    "cpu": {"process_pct": [90.0, 95.0, None], "workers_pct": [150.0, 180.0, 170.0]},
}
WITH_GPU = {
    "t_ns": [0, 100 * MS],
    "gpu": {"available": True, "util_pct": [[30.0, 50.0], [70.0, None]]},
    "cpu": {"process_pct": [50.0, 60.0], "workers_pct": [0.0, 0.0]},
}


def sources(layout):
    return {m.name: m for m in layout.select({"type": ColumnDataSource}) if m.name}


def test_layout_from_paths(tmp_path):
    p1 = run_of([20, 22, 18] * 10, util=CPU_ONLY).save(tmp_path / "real.json")
    p2 = run_of([10] * 30, mode="replay", util=CPU_ONLY).save(tmp_path / "ideal.json")
    layout = plot_comparison(real_log=p1, ideal_log=p2)
    src = sources(layout)
    # the first step (the start-up) is a marker of its own; the line holds the other 29
    assert len(src["steps_real"].data["step_ms"]) == 29
    assert src["startup_real"].data["step"] == [0]
    assert src["steps_ideal"].data["step_ms"][0] == pytest.approx(10.0)
    assert sum(src["hist_real"].data["count"]) == 29 and sum(src["hist_ideal"].data["count"]) == 29
    assert "gpu_pct" not in src["util_real"].data
    titles = [f.title.text for f in layout.select({"type": Plot}) if f.title is not None]
    assert any("no NVIDIA GPU readings" in t for t in titles)


def test_gpu_series_plotted_when_present():
    layout = plot_comparison(
        run_of([20] * 12, util=WITH_GPU), run_of([10] * 12, mode="replay", util=WITH_GPU)
    )
    data = sources(layout)["util_real"].data
    assert data["gpu_pct"] == [50.0, 50.0]  # mean over the GPUs with a reading


def test_one_run_only_and_no_run():
    layout = plot_comparison(real_log=run_of([20] * 5))
    assert "steps_ideal" not in sources(layout)
    with pytest.raises(LoadEvalError, match="needs real_log=, ideal_log= or both"):
        plot_comparison()


def report_divs(text):
    """The Div texts of a saved report as the browser gets them: Bokeh's document is
    JSON in a script tag, HTML-escaped once more for the file; BokehJS reads it back."""
    blob = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', text, re.S)
    doc = json.loads(html.unescape(blob.group(1)))
    found = {}

    def walk(x):
        if isinstance(x, dict):
            if x.get("type") == "object" and x.get("name") == "Div":
                attrs = x.get("attributes", {})
                found[attrs.get("name")] = attrs.get("text", "")
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return found


def test_report_is_standalone_html(tmp_path):
    real = run_of([20] * 20, util=CPU_ONLY)
    real.warmup = 3
    out = save_report(real, run_of([10] * 20, mode="replay"), tmp_path / "r.html")
    text = open(out, encoding="utf-8").read()
    assert "cdn.bokeh.org" not in text and "<script src=" not in text  # opens offline
    assert "Bokeh" in text and len(text) > 100_000
    divs = report_divs(text)
    # the verdict is the notebook's card, not a <pre> dump of the text report
    assert "loadeval-verdict" in divs["verdict"] and "<pre" not in divs["verdict"]
    assert "INPUT-BOUND" in divs["verdict"] and "loadeval-speedup" in divs["verdict"]
    assert "loadeval-advice" not in divs["verdict"]  # the advice is said last, once
    assert "What to do" in divs["advice"]
    assert "loadeval_nb report" in divs["title"]


def test_the_report_reads_top_to_bottom_and_uses_the_page_width():
    from bokeh.models import Div, Label, Legend

    real = run_of([20] * 20, util=CPU_ONLY)
    real.warmup = 3
    layout = plot_comparison(real, run_of([10] * 20, mode="replay", util=CPU_ONLY))
    kids = layout.children
    assert isinstance(kids[0], Div) and "loadeval-verdict" in kids[0].text
    assert isinstance(kids[-1], Div) and kids[-1].name == "advice"
    assert layout.sizing_mode == "stretch_width"
    assert all(k.sizing_mode == "stretch_width" for k in kids)
    plots = [k for k in kids if isinstance(k, Plot)]
    assert len(plots) == 3
    for p in plots:  # legends beside the plot, never over the data
        assert not [r for r in p.center if isinstance(r, Legend)]
        assert [r for r in p.right if isinstance(r, Legend)]
    labels = [a.text for a in plots[0].select({"type": Label})]
    assert labels == ["warm-up"]  # the shaded band says what it is


def test_a_fixed_width_is_kept_when_asked():
    layout = plot_comparison(run_of([20] * 12), run_of([10] * 12, mode="replay"), width=700)
    assert layout.sizing_mode != "stretch_width"
    assert all(k.width == 700 for k in layout.children)


def test_decimate_keeps_spikes_and_bounds_size():
    y = [1.0] * 100_000
    y[54_321] = 500.0
    x, yy = decimate(range(len(y)), y, 2000)
    assert len(yy) <= 2000 and max(yy) == 500.0 and 54_321 in x
    assert x == sorted(x)


def test_hist_shared_bins():
    a, b = hist_data([run_of([10, 11, 12] * 5), run_of([30] * 15)])
    assert a["left"] == b["left"] and sum(a["count"]) == 14 and sum(b["count"]) == 14


def test_util_data_nulls_become_nan():
    u = util_data(run_of([1], util=CPU_ONLY))
    assert u["gpu_pct"] is None and u["t_s"] == [0.0, 0.1, 0.2]
    assert u["process_cpu_pct"][2] != u["process_cpu_pct"][2]  # NaN


def test_one_line_per_rank_from_a_gathered_report():
    from bokeh.models import ColumnDataSource

    from loadeval_nb.core.ranks import RankResult
    from loadeval_nb.core.ranks.skew import ranks_result
    from loadeval_nb.viz import plot_comparison

    def run(ms, mode):
        step = [int(ms * 1e6)] * 20
        return Run(
            mode=mode,
            start_ns=[i * step[0] for i in range(20)],
            step_ns=step,
            wait_ns=[s // 2 for s in step] if mode == "log" else None,
        )

    ranks = ranks_result(
        [
            RankResult(r, "h", run(20, "log").to_dict(), run(10, "replay").to_dict())
            for r in range(2)
        ]
    )
    layout = plot_comparison(ranks=ranks)
    names = {m.name for m in layout.select({"type": ColumnDataSource})}
    assert {"steps_real r0", "steps_real r1", "steps_ideal r0", "steps_ideal r1"} <= names
    assert "2 ranks" in layout.children[0].text


class _FullDisk:
    """A text file whose disk fills halfway through the first write."""

    def __init__(self, f):
        self._f = f

    def write(self, text):
        self._f.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.mark.parametrize("where", ["write", "replace"])
def test_a_failed_report_write_names_the_path_asked_for(tmp_path, monkeypatch, where):
    from loadeval_nb.core import _files

    real, ideal = run_of([20] * 20), run_of([10] * 20, mode="replay")
    target = tmp_path / "r.html"
    target.write_text("the previous report")
    if where == "write":
        monkeypatch.setattr(_files, "open", lambda *a, **k: _FullDisk(open(*a, **k)), raising=False)
    else:

        def replace(src, dst):  # as os.replace says it: both names, the temporary one first
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, dst)

        monkeypatch.setattr(_files.os, "replace", replace)
    with pytest.raises(OSError) as info:
        save_report(real, ideal, target)
    assert info.value.filename == str(target) and str(target) in str(info.value)
    assert ".tmp-" not in str(info.value) and info.value.filename2 is None
    assert target.read_text() == "the previous report"
    assert os.listdir(tmp_path) == ["r.html"]  # no temporary file left
