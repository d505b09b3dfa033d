"""The view of a gathered many-rank result: the ranks' card and one line per rank and side."""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from ..core.ranks import RanksResult
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
    box = RanksBox(children, report.text(), layout=W.Layout(width=f"{width + 40}px"))
    box.add_class("loadeval-ranks")
    return box


class RanksBox(W.VBox):
    """The ranks' view: where widgets do not render (nbconvert, GitHub), its text is the
    gathered report in words, not ``VBox(children=(HTML(value='<div…``."""

    def __init__(self, children: list[Any], text: str, **kwargs: Any) -> None:
        super().__init__(children, **kwargs)
        self.plain_text = text

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle:
            bundle["text/plain"] = self.plain_text
        return bundle
