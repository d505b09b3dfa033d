"""Figures meant to be streamed into: empty sources, fixed colours, bounded length.

Pure Bokeh; the widgets layer wraps them in ``BokehModel`` and streams new rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Legend, LegendItem, Span
from bokeh.plotting import figure

from ..core._shared import SIDES, HistoryRow, fmt_rate
from ._style import COLORS, UTIL_SERIES, base_figure, color_of, startup_markers, startup_scale

LIVE_ROLLOVER = 5000
"""Points kept per live series: the browser stays quick however long the run."""


def live_step_figure(
    width: int = 900, height: int = 260, names: Sequence[str] = SIDES
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Step time (ms) per step, one line per run (real and ideal; or the ladder's rungs)
    overlaid; each epoch's first step (its start-up) is a labelled marker on a scale of
    its own, never setting the step axis. Returns (figure, line sources by run, start-up
    sources by run: ``step``, ``step_ms``, ``text`` as :func:`._data.startup_rows` makes them)."""
    p = base_figure("Step time per step", "step", "step time (ms)", width, height)
    sources, startups, lines = {}, {}, []
    for name in names:
        src = ColumnDataSource({"step": [], "step_ms": []}, name=f"live_steps_{name}")
        lines.append(
            p.line(
                "step",
                "step_ms",
                source=src,
                color=color_of(name),
                line_width=1.5,
                legend_label=name,
            )
        )
        sources[name] = src
    startup_scale(p, lines, len(names))
    for slot, name in enumerate(names):
        up = ColumnDataSource({"step": [], "step_ms": [], "text": []}, name=f"live_startup_{name}")
        startup_markers(p, up, color_of(name), slot)
        startups[name] = up
    p.add_tools(HoverTool(tooltips=[("step", "@step"), ("ms", "@step_ms{0.00}")]))
    p.legend.location = "top_right"
    p.legend.click_policy = "hide"
    return p, sources, startups


def live_util_figure(
    gpu: bool, width: int = 900, height: int = 260, names: Sequence[str] = SIDES
) -> tuple[Any, dict[str, Any]]:
    """Utilisation over time since each run's start: GPU % (solid; when ``gpu``), CPU of the
    process (dashed) and of the loader workers (dotted). Returns (figure, sources by run)."""
    title = "GPU and CPU utilisation" if gpu else "CPU utilisation (no NVIDIA GPU readings)"
    p = base_figure(title, "time since run start (s)", "% (CPU: 100 = one core)", width, height)
    sources = {}
    items = []
    for name in names:
        cols = {"t_s": [], "process_cpu_pct": [], "workers_cpu_pct": []}
        if gpu:
            cols["gpu_pct"] = []
        src = ColumnDataSource(cols, name=f"live_util_{name}")
        sources[name] = src
        for key, label, dash, line_width in UTIL_SERIES:
            if key not in cols:
                continue
            r = p.line(
                "t_s", key, source=src, color=color_of(name), line_dash=dash, line_width=line_width
            )
            items.append(LegendItem(label=f"{name} {label}", renderers=[r]))
    # above the frame, one row per run: inside the plot's width however narrow the
    # notebook, and never over the data
    per_run = len(items) // max(len(names), 1) or 1
    legend = Legend(
        items=items,
        click_policy="hide",
        label_text_font_size="8pt",
        orientation="horizontal",
        ncols=per_run,
        spacing=12,
        padding=2,
        margin=2,
        glyph_height=12,
        label_height=12,
    )
    p.add_layout(legend, "above")
    p.y_range.start = 0
    return p, sources


def history_figure(width: int = 450, height: int = 220) -> tuple[Any, Any]:
    """Mean step time (ms) per configuration, real vs ideal bars. Returns (figure, source)."""
    src = ColumnDataSource({"x": [], "ms": [], "run": [], "color": []}, name="history")
    p = figure(
        title="Configurations compared (mean step, ms)",
        x_range=FactorRange(factors=[]),
        width=width,
        height=height,
        tools="save",
        toolbar_location=None,
    )
    p.vbar(x="x", top="ms", width=0.8, source=src, color="color", legend_field="run")
    p.y_range.start = 0
    p.xaxis.major_label_orientation = 0.6
    p.add_layout(p.legend[0], "right")  # never over the bars
    return p, src


def history_data(rows: list[HistoryRow]) -> tuple[list[tuple[str, str]], dict[str, list[Any]]]:
    """Factors and bar data for :func:`history_figure` from history rows
    (``{"label", "real_step_s", "ideal_step_s"}``)."""
    factors: list[tuple[str, str]] = []
    data: dict[str, list[Any]] = {"x": [], "ms": [], "run": [], "color": []}
    for row in rows:
        for run in SIDES:
            v = getattr(row, f"{run}_step_s")
            if v is None:
                continue
            key = (str(row.label), run)
            factors.append(key)
            data["x"].append(key)
            data["ms"].append(v * 1e3)
            data["run"].append(run)
            data["color"].append(COLORS[run])
    return factors, data


def sweep_figure(width: int = 700, height: int = 260) -> tuple[Any, dict[str, Any]]:
    """Throughput (steps/s) per configuration: measured (dots), the simulator's prediction
    (grey diamonds) and the ideal loader's rate as a ceiling (dashed line).
    Returns (figure, {"measured": source, "predicted": source, "ideal": Span})."""
    p = figure(
        title="Sweep: steps/s per configuration (dashed: ideal loader)",
        x_range=FactorRange(factors=[]),
        width=width,
        height=height,
        tools="save,hover",
        toolbar_location=None,
        # plain text: Bokeh writes tooltip values as text, never as HTML
        tooltips=[("configuration", "@x"), ("steps/s", "@rate_text")],
    )
    measured = ColumnDataSource({"x": [], "rate": [], "rate_text": []}, name="sweep_measured")
    predicted = ColumnDataSource({"x": [], "rate": [], "rate_text": []}, name="sweep_predicted")
    p.scatter("x", "rate", source=measured, size=11, color=COLORS["real"], legend_label="measured")
    p.scatter(
        "x",
        "rate",
        source=predicted,
        size=10,
        marker="diamond",
        color=COLORS["predicted"],
        fill_alpha=0.4,
        legend_label="simulator",
    )
    ideal = Span(location=0, dimension="width", line_color=COLORS["ideal"], line_dash="dashed")
    ideal.visible = False
    p.add_layout(ideal)
    p.y_range.start = 0  # type: ignore[attr-defined]
    p.yaxis.axis_label = "steps/s"
    p.xaxis.major_label_orientation = 0.5
    p.legend.location = "bottom_right"
    return p, {"measured": measured, "predicted": predicted, "ideal": ideal}


def sweep_data(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """Factors, measured and predicted data for :func:`sweep_figure` from sweep table rows
    (rates also as text with three significant figures, for the tooltip)."""
    factors = [r["label"] for r in rows]
    measured: dict[str, list[Any]] = {"x": [], "rate": [], "rate_text": []}
    predicted: dict[str, list[Any]] = {"x": [], "rate": [], "rate_text": []}
    for r in rows:
        for data, key in ((measured, "steps_per_s"), (predicted, "predicted_steps_per_s")):
            if r.get(key):
                data["x"].append(r["label"])
                data["rate"].append(r[key])
                data["rate_text"].append(fmt_rate(r[key]))
    return factors, measured, predicted
