"""What every figure shares: run colours, the utilisation series drawn, the base figure."""

from __future__ import annotations

from typing import Any

from bokeh.plotting import figure

COLORS = {
    "real": "#d62728",
    "ideal": "#1f77b4",
    # caching ladder rungs
    "device": "#2ca02c",
    "host": "#1f77b4",
    "samples": "#ff7f0e",
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
