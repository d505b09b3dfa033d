"""loadeval_nb: is data loading slowing your PyTorch training down, and what would fixing it buy?

The names a user learns first::

    from loadeval_nb import LoaderEvaluator, RunSettings, diagnose, run_pair

The rest lives in public sub-namespaces, one job each: ``loadeval_nb.measure`` (the
wrapper, samplers), ``.record`` (run logs), ``.verdict`` (diagnosis, comparison),
``.whatif`` (the simulator), ``.explore`` (pair, ladder, sweep and their results),
``.ranks`` (torchrun) and ``.errors``: each is the same module as its home in core
(``loadeval_nb.measure`` is ``loadeval_nb.core.measure``). Plotting (``plot_comparison``, ``save_report``)
is imported on first use, so ``import loadeval_nb`` does not load Bokeh. In a
notebook: ``%load_ext loadeval_nb``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .core._shared import check_sorted, lazy_face

if TYPE_CHECKING:  # where each name lives; imported on first use: `import loadeval_nb` stays cheap
    from .core.errors import LoadEvalError
    from .core.explore import RunSettings, run_ladder, run_pair, run_sweep
    from .core.measure import LoaderEvaluator
    from .core.record import Run, load_run
    from .core.verdict import compare_runs, diagnose
    from .viz import plot_comparison, save_report

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


__getattr__, __dir__ = lazy_face(__name__)
