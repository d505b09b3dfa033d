"""loadeval_nb.viz: pure Bokeh figures from run logs (no ipywidgets).

Usable in scripts to write a standalone HTML report.
"""

from __future__ import annotations

from ._comparison import COLORS, plot_comparison, save_report
from ._data import decimate, hist_data, steps_data, util_data

__all__ = [
    "plot_comparison",
    "save_report",
    "COLORS",
    "decimate",
    "steps_data",
    "hist_data",
    "util_data",
]
