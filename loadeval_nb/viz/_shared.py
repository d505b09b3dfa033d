"""viz's private door: the live figures, their data functions and the cards the widgets
layer builds its dashboard from, which users do not need (see ``core._shared``)."""

from __future__ import annotations

from ._cards import (
    VERDICT_COLORS,
    advice_html,
    history_html,
    ladder_html,
    pair_html,
    report_html,
    sweep_html,
)
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
from ._style import UTIL_SERIES

__all__ = [
    "LIVE_ROLLOVER",
    "RUNS",
    "UTIL_SERIES",
    "VERDICT_COLORS",
    "advice_html",
    "decimate",
    "hist_data",
    "history_data",
    "history_figure",
    "history_html",
    "ladder_html",
    "live_step_figure",
    "live_util_figure",
    "pair_html",
    "report_html",
    "steps_data",
    "sweep_data",
    "sweep_figure",
    "sweep_html",
    "util_data",
]
