"""widgets' private door: what the magic builds its display from, which users do not need
(see ``core._shared``)."""

from __future__ import annotations

from ._bokeh import DisplayOnlyBokehModel, unload_bokehjs_output
from ._dashboard import LIVE_ONLY, gpu_notice
from ._follow import FollowView, Ticker, close_tree
from ._pusher import MAX_PUSH_INTERVAL_S, Pusher, next_push_wait
from ._saved import static_bundle

__all__ = [
    "DisplayOnlyBokehModel",
    "FollowView",
    "LIVE_ONLY",
    "MAX_PUSH_INTERVAL_S",
    "Pusher",
    "Ticker",
    "close_tree",
    "gpu_notice",
    "next_push_wait",
    "static_bundle",
    "unload_bokehjs_output",
]
