"""loadeval_nb.viz: pure Bokeh figures from run logs (no ipywidgets), static SVG charts and
the verdict's HTML card. Usable in scripts to write a standalone HTML report.

The widgets layer builds its live dashboard from the figures, data functions and cards
in this layer's private door, :mod:`loadeval_nb.viz._shared`.
"""

from __future__ import annotations

from ..core._shared import check_sorted
from ._cards import verdict_html
from ._comparison import plot_comparison, save_report
from ._style import COLORS
from ._svg import bars_svg, steps_svg

__all__ = ["COLORS", "bars_svg", "plot_comparison", "save_report", "steps_svg", "verdict_html"]
check_sorted(__name__, __all__)
