"""The house shape: core imports nothing from Jupyter or Bokeh."""

from __future__ import annotations

import subprocess
import sys

import pytest

FORBIDDEN = ("IPython", "ipywidgets", "bokeh", "jupyter_bokeh")


@pytest.mark.parametrize("module", ["loadeval_nb.core", "loadeval_nb"])
def test_core_loads_no_jupyter_or_bokeh(module):
    code = (
        f"import sys, {module}\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"


def test_viz_is_lazy_but_reachable():
    import loadeval_nb

    assert callable(loadeval_nb.plot_comparison) and callable(loadeval_nb.save_report)
    with pytest.raises(AttributeError):
        loadeval_nb.not_a_thing
