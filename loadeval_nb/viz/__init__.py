"""loadeval_nb.viz: pure Bokeh figures from run logs (no ipywidgets), static SVG charts, and
the HTML cards that render a result's facts (the notebook's and the report's verdict).

Usable in scripts to write a standalone HTML report. The widgets layer builds its
live dashboard from the figures and data functions exported here (this ``__init__``
is the layer's one seam).
"""

from __future__ import annotations

from ._cards import (
    VERDICT_COLORS,
    advice_html,
    history_html,
    ladder_html,
    pair_html,
    report_html,
    sweep_html,
    verdict_html,
)
from ._comparison import plot_comparison, save_report
from ._data import decimate, hist_data, steps_data, util_data
from ._live import (
    LIVE_ROLLOVER,
    RUNS,
    history_data,
    history_figure,
    live_step_figure,
    live_util_figure,
    sweep_data,
    sweep_figure,
)
from ._style import COLORS, UTIL_SERIES
from ._svg import bars_svg, steps_svg

__all__ = [
    "plot_comparison",
    "save_report",
    "COLORS",
    "UTIL_SERIES",
    "decimate",
    "steps_data",
    "hist_data",
    "util_data",
    "LIVE_ROLLOVER",
    "RUNS",
    "live_step_figure",
    "live_util_figure",
    "history_figure",
    "history_data",
    "sweep_figure",
    "sweep_data",
    "steps_svg",
    "bars_svg",
    "report_html",
    "verdict_html",
    "advice_html",
    "ladder_html",
    "sweep_html",
    "history_html",
    "pair_html",
    "VERDICT_COLORS",
]
