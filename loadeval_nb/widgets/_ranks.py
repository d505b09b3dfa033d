"""The view of a gathered many-rank result: the ranks' card and one line per rank and side."""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from ..core import RanksResult
from ..viz import plot_comparison
from ..viz._shared import report_html
from ._bokeh import DisplayOnlyBokehModel, load_bokehjs, unload_bokehjs_output


def ranks_view(report: RanksResult, *, width: int = 900, live: bool = True) -> Any:
    """A widget with the gathered report's card (per-rank verdicts, the slowest rank, a
    straggler) and step time, distributions and utilisation with one line per rank and
    side. ``live=False`` leaves the plots out (no BokehJS)."""
    children: list[Any] = [W.HTML(report_html(report.facts()))]
    if live:
        unload_bokehjs_output(load_bokehjs())  # the page keeps it; the saved notebook not
        children.append(
            DisplayOnlyBokehModel(plot_comparison(ranks=report, width=width, show_verdict=False))
        )
    box = W.VBox(children, layout=W.Layout(width=f"{width + 40}px"))
    box.add_class("loadeval-ranks")
    return box
