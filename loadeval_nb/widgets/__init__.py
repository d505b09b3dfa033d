"""loadeval_nb.widgets: ipywidgets + jupyter_bokeh dashboards (live plots, the rerun
panel, the ranks' view). The magic reaches the rest through this layer's private door,
:mod:`loadeval_nb.widgets._shared`; the cards it shows come from :mod:`loadeval_nb.viz`."""

from __future__ import annotations

from ..core._shared import check_sorted
from ._bokeh import load_bokehjs
from ._dashboard import Dashboard
from ._panel import RerunPanel
from ._ranks import ranks_view

__all__ = ["Dashboard", "RerunPanel", "load_bokehjs", "ranks_view"]
check_sorted(__name__, __all__)
