"""loadeval_nb: is data loading slowing your PyTorch training down, and what would fixing it buy?

Core (no Jupyter needed)::

    from loadeval_nb import LoaderEvaluator, diagnose, plot_comparison

Plotting (``plot_comparison``, ``save_report``) is imported on first use, so
``import loadeval_nb`` does not load Bokeh.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .core import (
    CacheBudgetError,
    CacheMutationWarning,
    Diagnosis,
    LoaderEvaluator,
    LoadEvalError,
    Run,
    RunLogError,
    diagnose,
    load_run,
)

__all__ = [
    "__version__",
    "LoaderEvaluator",
    "Run",
    "load_run",
    "diagnose",
    "Diagnosis",
    "plot_comparison",
    "save_report",
    "LoadEvalError",
    "CacheBudgetError",
    "RunLogError",
    "CacheMutationWarning",
]


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext loadeval_nb``: register ``%%loadeval`` (imported only now)."""
    from .magic import LoadEvalMagics

    ip.register_magics(LoadEvalMagics)


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext loadeval_nb``: stop dashboards' background threads."""
    from .magic import stop_all

    stop_all()


_LAZY = {"plot_comparison": "loadeval_nb.viz", "save_report": "loadeval_nb.viz"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'loadeval_nb' has no attribute {name!r}")
