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
