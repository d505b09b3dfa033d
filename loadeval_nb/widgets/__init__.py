"""loadeval_nb.widgets: ipywidgets + jupyter_bokeh dashboards (live plots, the rerun
panel, the ranks' view). The magic reaches the rest through this layer's private door,
:mod:`loadeval_nb.widgets._shared`; the cards it shows come from :mod:`loadeval_nb.viz`."""

from __future__ import annotations

from typing import Any

from ..core._shared import check_sorted, moved_name
from . import _shared
from ._bokeh import load_bokehjs
from ._dashboard import Dashboard
from ._panel import RerunPanel
from ._ranks import ranks_view

__all__ = ["Dashboard", "RerunPanel", "load_bokehjs", "ranks_view"]
check_sorted(__name__, __all__)

MOVED = {
    **{name: f"loadeval_nb.widgets._shared.{name}" for name in _shared.__all__},
    # the cards are viz's: one renderer, one place
    **{
        name: f"loadeval_nb.viz._shared.{name}"
        for name in ("report_html", "history_html", "pair_html", "ladder_html", "sweep_html")
    },
    "verdict_html": "loadeval_nb.viz.verdict_html",
}


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name, MOVED)
