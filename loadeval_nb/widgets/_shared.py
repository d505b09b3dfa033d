"""widgets' private door: what the magic builds its display from, which users do not need
(see ``core._shared``)."""

from __future__ import annotations

from ._dashboard import Dashboard, gpu_notice
from ._follow import FollowView, Ticker, close_tree
from ._html_view import HtmlDashboard
from ._text_view import TextDashboard

DASHBOARDS = {"bokeh": Dashboard, "html": HtmlDashboard, "text": TextDashboard}
"""The dashboard of each view ``%%loadeval --view`` names."""

__all__ = [
    "DASHBOARDS",
    "FollowView",
    "Ticker",
    "close_tree",
    "gpu_notice",
]
