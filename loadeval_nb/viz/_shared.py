"""viz's private door: the live figures, their data functions and the cards the widgets
layer builds its dashboard from, which users do not need (see ``core._shared``)."""

from __future__ import annotations

from ._cards import (
    DISTURBED_COLOR,
    history_html,
    ladder_html,
    pair_config,
    pair_html,
    report_html,
    sweep_html,
)
from ._data import startup_data, startup_rows, steps_data
from ._live import (
    LIVE_ROLLOVER,
    SIDES,
    history_data,
    history_figure,
    live_step_figure,
    live_util_figure,
    sweep_data,
    sweep_figure,
)

__all__ = [
    "DISTURBED_COLOR",
    "LIVE_ROLLOVER",
    "SIDES",
    "history_data",
    "history_figure",
    "history_html",
    "ladder_html",
    "live_step_figure",
    "live_util_figure",
    "pair_config",
    "pair_html",
    "report_html",
    "startup_data",
    "startup_rows",
    "steps_data",
    "sweep_data",
    "sweep_figure",
    "sweep_html",
]
