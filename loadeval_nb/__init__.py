"""loadeval_nb: is data loading slowing your PyTorch training down, and what would fixing it buy?

The names a user learns first::

    from loadeval_nb import LoaderEvaluator, RunSettings, diagnose, run_pair

The rest lives in public sub-namespaces, one job each: ``loadeval_nb.measure`` (the
wrapper, samplers), ``.record`` (run logs), ``.verdict`` (diagnosis, comparison),
``.whatif`` (the simulator), ``.explore`` (pair, ladder, sweep and their results),
``.ranks`` (torchrun) and ``.errors``. Plotting (``plot_comparison``, ``save_report``)
is imported on first use, so ``import loadeval_nb`` does not load Bokeh. In a
notebook: ``%load_ext loadeval_nb``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .core._shared import check_sorted

if TYPE_CHECKING:  # imported on first use: `import loadeval_nb` stays cheap
    from .core import (
        LoaderEvaluator,
        LoadEvalError,
        Run,
        RunSettings,
        compare_runs,
        diagnose,
        load_run,
        run_ladder,
        run_pair,
        run_sweep,
    )

__all__ = [
    "LoadEvalError",
    "LoaderEvaluator",
    "Run",
    "RunSettings",
    "__version__",
    "compare_runs",
    "diagnose",
    "load_run",
    "plot_comparison",
    "run_ladder",
    "run_pair",
    "run_sweep",
    "save_report",
]
check_sorted(__name__, __all__)


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext loadeval_nb``: register ``%%loadeval`` (imported only now)."""
    from .magic import LoadEvalMagics

    ip.register_magics(LoadEvalMagics)


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext loadeval_nb``: stop dashboards' background threads."""
    from .magic import stop_all

    stop_all()


_LAZY = {
    "plot_comparison": "loadeval_nb.viz",
    "save_report": "loadeval_nb.viz",
    **{
        name: "loadeval_nb.core"
        for name in [
            "LoaderEvaluator",
            "LoadEvalError",
            "Run",
            "RunSettings",
            "compare_runs",
            "diagnose",
            "load_run",
            "run_ladder",
            "run_pair",
            "run_sweep",
        ]
    },
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        if _LAZY[name] == "loadeval_nb.core":
            globals()[name] = value  # kept: the next use is a plain lookup
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
