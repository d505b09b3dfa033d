"""plot_comparison: real vs ideal runs as a Bokeh layout, and a standalone HTML report."""

from __future__ import annotations

import html
import os
from typing import Any, Optional

from bokeh.embed import file_html
from bokeh.layouts import column, row
from bokeh.models import BoxAnnotation, ColumnDataSource, Div, HoverTool
from bokeh.resources import INLINE

from ..core import LoadEvalError, Run, as_run, diagnose, write_text_atomic
from ._data import hist_data, steps_data, util_data
from ._style import UTIL_SERIES, base_figure, color_of


def _runs(real_log: Any, ideal_log: Any) -> tuple[Optional[Run], Optional[Run]]:
    if real_log is None and ideal_log is None:
        raise LoadEvalError(
            "plot_comparison needs real_log=, ideal_log= or both (paths, runs or evaluators), "
            "or ranks= (a RankReport from gather_pair)."
        )
    r = as_run(real_log, "real_log") if real_log is not None else None
    i = as_run(ideal_log, "ideal_log") if ideal_log is not None else None
    return r, i


def _rank_runs(ranks: Any) -> dict[str, Run]:
    """One real and one ideal run per rank of a gathered :class:`~loadeval_nb.RankReport`
    (or a list of ``(real, ideal)`` pairs, one per rank)."""
    pairs = (
        [(r.run("real"), r.run("ideal")) for r in ranks.ranks]
        if hasattr(ranks, "ranks")
        else [(as_run(a, "real"), as_run(b, "ideal")) for a, b in ranks]
    )
    out: dict[str, Run] = {}
    for k, (real, ideal) in enumerate(pairs):
        rank = ranks.ranks[k].rank if hasattr(ranks, "ranks") else k
        for side, run in (("real", real), ("ideal", ideal)):
            if run is not None:
                out[f"{side} r{rank}"] = run
    if not out:
        raise LoadEvalError("ranks= holds no runs to plot; pass gather_pair()'s report.")
    return out


def _step_figure(runs: dict[str, Run], width: int) -> Any:
    p = base_figure("Step time per step", "step", "step time (ms)", width)
    warm = max((r.warmup_steps for r in runs.values()), default=0)
    if warm:
        p.add_layout(BoxAnnotation(right=warm - 0.5, fill_alpha=0.08, fill_color="gray"))
    for name, run in runs.items():
        src = ColumnDataSource(steps_data(run), name=f"steps_{name}")
        p.line(
            "step", "step_ms", source=src, color=color_of(name), legend_label=name, line_width=1.5
        )
        p.scatter("step", "step_ms", source=src, color=color_of(name), size=3, alpha=0.6)
    p.add_tools(HoverTool(tooltips=[("step", "@step"), ("ms", "@step_ms{0.00}")]))
    p.legend.location = "top_right"
    p.legend.click_policy = "hide"
    return p


def _hist_figure(runs: dict[str, Run], width: int) -> Any:
    p = base_figure("Step-time distribution (steady steps)", "step time (ms)", "steps", width)
    for (name, _), data in zip(runs.items(), hist_data(list(runs.values()))):
        src = ColumnDataSource(data, name=f"hist_{name}")
        p.quad(
            left="left",
            right="right",
            top="count",
            bottom=0,
            source=src,
            fill_color=color_of(name),
            line_color=color_of(name),
            fill_alpha=0.35,
            legend_label=name,
        )
    p.legend.location = "top_right"
    return p


def _util_figure(runs: dict[str, Run], width: int) -> Any:
    has_gpu = any(util_data(r)["gpu_pct"] is not None for r in runs.values())
    title = (
        "Utilisation over time" if has_gpu else "CPU utilisation over time (no NVIDIA GPU readings)"
    )
    p = base_figure(title, "time since run start (s)", "utilisation (%; 100 = one CPU core)", width)
    drew = False
    for name, run in runs.items():
        u = util_data(run)
        if not u["t_s"]:
            continue
        data = {"t_s": u["t_s"]}
        for key, _, _, _ in UTIL_SERIES:
            if u[key] is not None:
                data[key] = u[key]
        src = ColumnDataSource(data, name=f"util_{name}")
        for key, label, dash, width_px in UTIL_SERIES:
            if key in data:
                p.line(
                    "t_s",
                    key,
                    source=src,
                    color=color_of(name),
                    line_dash=dash,
                    line_width=width_px,
                    legend_label=f"{name} {label}",
                )
                drew = True
    if drew:
        p.legend.location = "bottom_right"
        p.legend.background_fill_alpha = 0.6
        p.legend.label_text_font_size = "9pt"
        p.legend.click_policy = "hide"
    return p


def _verdict_div(result: Any, width: int) -> Any:
    if result is None:
        return Div(text="", width=width)
    body = html.escape(str(result))
    return Div(text=f"<pre style='font-size:12px;margin:0'>{body}</pre>", width=width)


def plot_comparison(
    real_log: Any = None,
    ideal_log: Any = None,
    *,
    ranks: Any = None,
    width: int = 900,
    show_verdict: bool = True,
) -> Any:
    """A Bokeh layout comparing a real run with an ideal one.

    ``real_log`` / ``ideal_log``: paths of run logs, :class:`~loadeval_nb.Run`
    objects or evaluators; either may be omitted to plot one run. The layout
    holds the verdict (when both are given), step time per step, the step-time
    distributions and utilisation over time. Show it with ``bokeh.io.show`` or
    write it with :func:`save_report`.

    ``ranks``: a :class:`~loadeval_nb.RankReport` from :func:`~loadeval_nb.gather_pair`
    (or a list of ``(real, ideal)`` per rank) plots one line per rank and side, under
    the gathered report.
    """
    if ranks is not None:
        runs = _rank_runs(ranks)
        text: Any = ranks if hasattr(ranks, "report") and show_verdict else None
    else:
        r, i = _runs(real_log, ideal_log)
        runs = {k: v for k, v in (("real", r), ("ideal", i)) if v is not None}
        text = diagnose(r, i) if (show_verdict and r is not None and i is not None) else None
    half = width // 2
    return column(
        _verdict_div(text, width),
        _step_figure(runs, width),
        row(_hist_figure(runs, half), _util_figure(runs, half)),
        name="loadeval_comparison",
    )


def save_report(
    real_log: Any = None,
    ideal_log: Any = None,
    path: str | os.PathLike[str] = "loadeval-report.html",
    *,
    title: str = "loadeval_nb report",
    ranks: Any = None,
) -> str:
    """Write :func:`plot_comparison` as one standalone HTML file (BokehJS inlined:
    it opens offline). Returns the path."""
    layout = plot_comparison(real_log, ideal_log, ranks=ranks)
    # a failed write leaves the previous report as it was
    return write_text_atomic(path, file_html(layout, resources=INLINE, title=title))
