"""What every figure shares: run colours, the utilisation series drawn, the base figure."""

from __future__ import annotations

from typing import Any

from bokeh.models import DataRange1d, LabelSet, Range1d
from bokeh.plotting import figure

COLORS = {
    "real": "#d62728",
    "ideal": "#1f77b4",
    # caching ladder rungs
    "device": "#2ca02c",
    "host": "#1f77b4",
    "samples": "#ff7f0e",
    # the contended arm: the ideal's hue, darker
    "contended": "#08519c",
    # the variant arm (the loader rebuilt with other settings): green, its own hue
    "variant": "#2ca02c",
    # sweep chart
    "predicted": "#7f7f7f",
}
TOOLS = "pan,wheel_zoom,box_zoom,reset,save"
_RANK_SHADES = {
    "real": ("#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22", "#7f0000"),
    "ideal": ("#1f77b4", "#17becf", "#9467bd", "#2ca02c", "#393b79", "#6baed6"),
}


def color_of(name: str) -> str:
    """The colour of a run's line: ``real``, ``ideal``, a ladder rung, or a rank's run
    (``real r3``: one hue family per side, a shade per rank)."""
    if name in COLORS:
        return COLORS[name]
    side, _, rank = name.partition(" r")
    shades = _RANK_SHADES.get(side)
    if shades is not None and rank.isdigit():
        return shades[int(rank) % len(shades)]
    return "#333333"


UTIL_SERIES = (
    # (column, legend label, line dash, line width)
    ("gpu_pct", "GPU", "solid", 2.5),
    ("process_cpu_pct", "CPU (process)", "dashed", 1.5),
    ("workers_cpu_pct", "CPU (workers)", "dotted", 1.5),
)
"""The utilisation lines, in the static comparison and the live dashboard alike."""


def base_figure(title: str, x_label: str, y_label: str, width: int, height: int = 280) -> Any:
    return figure(
        title=title,
        x_axis_label=x_label,
        y_axis_label=y_label,
        width=width,
        height=height,
        tools=TOOLS,
    )


STARTUP_RANGE = "startup"
"""The start-up markers' own vertical scale: 0 at the frame's bottom, 1 at its top."""


MARKER_ROWS = 4
"""Rows of start-up markers at most; more runs (a many-rank plot) share them."""


def startup_scale(p: Any, step_renderers: list[Any], rows: int) -> None:
    """Let the step time axis follow the steps drawn by ``step_renderers`` only, and give
    start-up markers (:func:`startup_markers`, ``rows`` rows of them) a scale of their own:
    a first step ten times the steady ones (worker spawn, the first fetch) no longer
    squashes them at the bottom."""
    # room at the top for the markers and the legend, above the steps (the padding is
    # shared by both ends, and the bottom one is cut off at 0)
    pad = 2 * (0.2 + 0.09 * min(rows, MARKER_ROWS))
    p.y_range = DataRange1d(renderers=step_renderers, start=0, range_padding=pad)
    p.extra_y_ranges = {STARTUP_RANGE: Range1d(0, 1)}


def startup_markers(p: Any, source: Any, color: str, slot: int = 0) -> Any:
    """Draw a run's start-up steps (``source``: ``step``, ``step_ms``, ``text``) as triangles
    near the top of the frame, on the start-up scale, each with its label (``real first
    step 1.25 s``: the whole first step, the start-up and that step's own work); ``slot`` stacks several runs' markers one under the other. Returns the
    markers' renderer."""
    y = 0.87 - 0.08 * (slot % MARKER_ROWS)  # under a label at the frame's top
    r = p.scatter(
        "step",
        y,
        source=source,
        y_range_name=STARTUP_RANGE,
        marker="triangle",
        size=9,
        color=color,
        name=f"{source.name}_markers" if source.name else None,
    )
    p.add_layout(
        LabelSet(
            x="step",
            y=y,
            text="text",
            source=source,
            y_range_name=STARTUP_RANGE,
            x_offset=8,
            y_offset=-5,
            text_font_size="8pt",
            text_color=color,
        )
    )
    return r
