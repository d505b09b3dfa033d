"""widgets' private door: what the magic builds its display from, which users do not need
(see ``core._shared``)."""

from __future__ import annotations

from ._bokeh import DisplayOnlyBokehModel, unload_bokehjs_output
from ._comms import on_main_shell
from ._dashboard import LIVE_ONLY, Dashboard, gpu_notice
from ._follow import FollowView, Ticker, close_tree
from ._html_view import HTML_PUSH_INTERVAL_S, HtmlDashboard, HtmlPusher
from ._panel import advised_sweep, sweep_default
from ._pusher import MAX_PUSH_INTERVAL_S, Pusher, next_push_wait, startup_positions
from ._saved import static_bundle
from ._text_view import TextDashboard, TextPusher

DASHBOARDS = {"bokeh": Dashboard, "html": HtmlDashboard, "text": TextDashboard}
"""The dashboard of each view ``%%loadeval --view`` names."""

__all__ = [
    "DASHBOARDS",
    "DisplayOnlyBokehModel",
    "FollowView",
    "HTML_PUSH_INTERVAL_S",
    "HtmlDashboard",
    "HtmlPusher",
    "LIVE_ONLY",
    "MAX_PUSH_INTERVAL_S",
    "Pusher",
    "TextDashboard",
    "TextPusher",
    "Ticker",
    "advised_sweep",
    "close_tree",
    "gpu_notice",
    "next_push_wait",
    "on_main_shell",
    "startup_positions",
    "static_bundle",
    "sweep_default",
    "unload_bokehjs_output",
]
