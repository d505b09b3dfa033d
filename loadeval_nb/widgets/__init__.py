"""loadeval_nb.widgets: ipywidgets + jupyter_bokeh dashboards (live plots, rerun panel),
and the HTML cards they show (this ``__init__`` is the layer's one seam)."""

from __future__ import annotations

from ._bokeh import DisplayOnlyBokehModel, load_bokehjs, unload_bokehjs_output
from ._cards import (
    history_html,
    ladder_html,
    pair_html,
    report_html,
    static_bundle,
    sweep_html,
    verdict_html,
)
from ._dashboard import Dashboard, gpu_notice
from ._panel import RerunPanel
from ._pusher import MAX_PUSH_INTERVAL_S, Pusher, next_push_wait
from ._ranks import ranks_view

__all__ = [
    "Dashboard",
    "gpu_notice",
    "RerunPanel",
    "ranks_view",
    "Pusher",
    "next_push_wait",
    "MAX_PUSH_INTERVAL_S",
    "DisplayOnlyBokehModel",
    "load_bokehjs",
    "unload_bokehjs_output",
    "report_html",
    "verdict_html",
    "history_html",
    "static_bundle",
    "pair_html",
    "ladder_html",
    "sweep_html",
]
