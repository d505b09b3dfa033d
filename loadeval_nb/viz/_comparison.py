"""plot_comparison: real vs ideal runs as a Bokeh layout, and a standalone HTML report.

The layout reads top to bottom: what was compared and the verdict (the notebook's card),
step time per step, the step-time distributions, utilisation over time, and last what
to do. It stretches to the page's width; legends sit beside the plots, never on the data.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Optional

from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import (
    BoxAnnotation,
    ColumnDataSource,
    Div,
    HoverTool,
    Label,
    Node,
)
from bokeh.resources import INLINE

from ..core._shared import as_run, write_text_atomic
from ..core.errors import LoadEvalError
from ..core.record import Run
from ..core.verdict import Facts, diagnose
from ._cards import advice_html, esc, report_html
from ._data import hist_data, startup_data, steps_data, util_data
from ._style import UTIL_SERIES, base_figure, color_of, startup_markers, startup_scale

_FULL_WIDTH = ".bk-clearfix { width: 100%; }"
"""A Div's content box fills the Div (a card's border spans the page, not its text)."""


def _runs(real_log: Any, ideal_log: Any) -> tuple[Optional[Run], Optional[Run]]:
    if real_log is None and ideal_log is None:
        raise LoadEvalError(
            "plot_comparison needs real_log=, ideal_log= or both (paths, runs or evaluators), "
            "or ranks= (a RanksResult from gather_pair)."
        )
    r = as_run(real_log, "real_log") if real_log is not None else None
    i = as_run(ideal_log, "ideal_log") if ideal_log is not None else None
    return r, i


def _rank_runs(ranks: Any) -> dict[str, Run]:
    """One real and one ideal run per rank of a gathered :class:`~loadeval_nb.ranks.RanksResult`
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


def _figure(title: str, x: str, y: str, width: Optional[int], height: int) -> Any:
    p = base_figure(title, x, y, width or 900, height)
    p.toolbar_location = "above"  # the legend takes the right-hand side
    if width is None:
        p.sizing_mode = "stretch_width"
    return p


def _legend_outside(p: Any, **style: Any) -> None:
    """Move the figure's legend beside the plot, so it never hides data."""
    if not p.legend:
        return
    legend = p.legend[0]
    p.center = [r for r in p.center if r is not legend]
    legend.location = "top_left"
    legend.click_policy = "hide"
    for k, v in style.items():
        setattr(legend, k, v)
    p.add_layout(legend, "right")


def _step_figure(runs: dict[str, Run], width: Optional[int]) -> Any:
    p = _figure("Step time per step", "step", "step time (ms)", width, 300)
    warm = max((r.warmup for r in runs.values()), default=0)
    if warm:
        # the steps left out of the statistics: shaded, and said so on the band
        p.add_layout(BoxAnnotation(right=warm - 0.5, fill_alpha=0.12, fill_color="gray"))
        p.add_layout(
            Label(
                x=-0.5,
                y=Node(target="frame", symbol="top"),
                text="warm-up",
                anchor="top_left",
                x_offset=3,
                y_offset=3,
                text_font_size="9pt",
                text_color="#555",
                name="warmup_label",
            )
        )
    steps = []
    for name, run in runs.items():
        src = ColumnDataSource(steps_data(run), name=f"steps_{name}")
        steps.append(
            p.line(
                "step",
                "step_ms",
                source=src,
                color=color_of(name),
                legend_label=name,
                line_width=1.5,
            )
        )
        steps.append(
            p.scatter("step", "step_ms", source=src, color=color_of(name), size=3, alpha=0.6)
        )
    # each epoch's first step (its start-up) on a scale of its own: the steps set the axis
    # (the top's room for the markers also holds the warm-up band's label)
    startup_scale(p, steps, len(runs))
    for slot, (name, run) in enumerate(runs.items()):
        up = ColumnDataSource(startup_data(run, name), name=f"startup_{name}")
        startup_markers(p, up, color_of(name), slot)
    p.add_tools(HoverTool(tooltips=[("step", "@step"), ("ms", "@step_ms{0.00}")]))
    _legend_outside(p)
    return p


def _hist_figure(runs: dict[str, Run], width: Optional[int]) -> Any:
    p = _figure("Step-time distribution (steady steps)", "step time (ms)", "steps", width, 250)
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
    _legend_outside(p)
    return p


def _util_figure(runs: dict[str, Run], width: Optional[int]) -> Any:
    """Utilisation over time; None when no run has samples (sampling was off)."""
    has_gpu = any(util_data(r)["gpu_pct"] is not None for r in runs.values())
    title = (
        "Utilisation over time" if has_gpu else "CPU utilisation over time (no NVIDIA GPU readings)"
    )
    p = _figure(title, "time since run start (s)", "% (CPU: 100 = one core)", width, 260)
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
    if not p.renderers:
        return None
    _legend_outside(p, label_text_font_size="9pt")
    return p


def _describe(name: str, run: Run) -> str:
    """One line on what a run was: its label, loader settings, when and on what."""
    loader = run.loader_settings or {}
    knobs = ", ".join(
        f"{k}={loader[k]}"
        for k in ("batch_size", "num_workers", "pin_memory", "prefetch_factor")
        if loader.get(k) is not None
    )
    if run.mode == "replay":
        what = f"replayed cache of {run.settings.get('num_cached_batches') or '?'} batches"
    else:
        what = "real loader" + (f" ({knobs})" if knobs else "")
    env = run.environment or {}
    devices = ", ".join(env.get("devices") or []) or (
        f"CPU ({env['cpu_count']} cores)" if env.get("cpu_count") else "CPU"
    )
    torch = f", torch {env['torch_version']}" if env.get("torch_version") else ""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_unix))
    label = f" “{run.label}”" if run.label and run.label != name else ""
    return f"<b>{esc(name)}</b>{esc(label)}: {esc(what)}; {esc(when)}, {esc(devices)}{esc(torch)}"


def _split_advice(report: Facts) -> tuple[Facts, Any]:
    """The report without its advice, and the advice (None when it has none): the verdict
    comes first and what to do last."""
    advice = next((f for f in report.facts if f.key == "advice"), None)
    rest = tuple(f for f in report.facts if f.key != "advice")
    return dataclasses.replace(report, facts=rest), advice


def plot_comparison(
    real_log: Any = None,
    ideal_log: Any = None,
    *,
    ranks: Any = None,
    width: Optional[int] = None,
    show_verdict: bool = True,
) -> Any:
    """A Bokeh layout comparing a real run with an ideal one.

    ``real_log`` / ``ideal_log``: paths of run logs, :class:`~loadeval_nb.Run`
    objects or evaluators; either may be omitted to plot one run. The layout
    holds what was compared and the verdict card (when both are given), step time
    per step (warm-up shaded and labelled), the step-time distributions,
    utilisation over time, and the verdict's advice last. It stretches to the
    page's width; ``width=`` (pixels) fixes it instead. Show it with
    ``bokeh.io.show`` or write it with :func:`save_report`.

    ``ranks``: a :class:`~loadeval_nb.ranks.RanksResult` from :func:`~loadeval_nb.ranks.gather_pair`
    (or a list of ``(real, ideal)`` per rank) plots one line per rank and side, under
    the gathered report's card (and ends with the slowest rank's advice).
    """
    report = advice = None
    if ranks is not None:
        runs = _rank_runs(ranks)
        if show_verdict and hasattr(ranks, "facts"):
            report = ranks.facts()
            slow = ranks.diagnosis()
            if slow is not None:
                _, advice = _split_advice(slow.facts())
                if advice is not None:
                    advice = advice._replace(
                        label=f"what to do (rank {ranks.slowest}, the slowest)"
                    )
    else:
        r, i = _runs(real_log, ideal_log)
        runs = {k: v for k, v in (("real", r), ("ideal", i)) if v is not None}
        if show_verdict and r is not None and i is not None:
            report, advice = _split_advice(diagnose(r, i).facts())
    head = []
    if show_verdict:
        if ranks is None:
            head.append("<br>".join(_describe(name, run) for name, run in runs.items()))
        if report is not None:
            head.append(report_html(report, spelling="keywords"))
    children = []
    if head:
        text = (
            f"<div style='font-family:sans-serif;font-size:12px;color:#444'>{''.join(head)}</div>"
        )
        children.append(Div(text=text, name="verdict"))
    children += [_step_figure(runs, width), _hist_figure(runs, width)]
    util = _util_figure(runs, width)
    if util is not None:
        children.append(util)
    if advice is not None:
        children.append(Div(text=advice_html(advice), name="advice"))
    for div in children:
        if isinstance(div, Div):  # as wide as the plots
            if width is None:
                div.sizing_mode = "stretch_width"
                div.stylesheets = [_FULL_WIDTH]
            else:
                div.width = width
    return column(
        children,
        name="loadeval_comparison",
        **({"sizing_mode": "stretch_width"} if width is None else {}),
    )


def save_report(
    real_log: Any = None,
    ideal_log: Any = None,
    path: str | os.PathLike[str] = "loadeval-report.html",
    *,
    title: str = "loadeval_nb report",
    ranks: Any = None,
) -> str:
    """Write :func:`plot_comparison` as one standalone HTML file that uses the page's
    width: a heading, the verdict card, the plots, and what to do. BokehJS is inlined,
    so it opens offline. Returns the path."""
    layout = plot_comparison(real_log, ideal_log, ranks=ranks)
    heading = Div(
        text=f"<h2 style='font-family:sans-serif;margin:4px 0'>{esc(title)}</h2>",
        sizing_mode="stretch_width",
        stylesheets=[_FULL_WIDTH],
        name="title",
    )
    page = column([heading, layout], sizing_mode="stretch_width")
    # a failed write leaves the previous report as it was
    return write_text_atomic(path, file_html(page, resources=INLINE, title=title))
