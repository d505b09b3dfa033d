"""loadeval_nb.widgets: ipywidgets + jupyter_bokeh dashboards (live plots, rerun panel)."""

from __future__ import annotations

from ._bokeh import DisplayOnlyBokehModel, load_bokehjs, unload_bokehjs_output
from ._dashboard import (
    Dashboard,
    history_html,
    ladder_html,
    pair_html,
    static_bundle,
    sweep_html,
    verdict_html,
)
from ._panel import RerunPanel

__all__ = [
    "Dashboard",
    "RerunPanel",
    "DisplayOnlyBokehModel",
    "load_bokehjs",
    "unload_bokehjs_output",
    "verdict_html",
    "history_html",
    "static_bundle",
    "pair_html",
    "ladder_html",
    "sweep_html",
]
