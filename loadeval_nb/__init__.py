"""loadeval_nb: is data loading slowing your PyTorch training down, and what would fixing it buy?

Core (no Jupyter needed)::

    from loadeval_nb import LoaderEvaluator, diagnose, run_pair, RunSettings

Plotting (``plot_comparison``, ``save_report``) is imported on first use, so
``import loadeval_nb`` does not load Bokeh. In a notebook: ``%load_ext loadeval_nb``.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .core import (
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    AutoStop,
    CacheBudgetError,
    CacheMutationWarning,
    Comparison,
    Diagnosis,
    LadderResult,
    LoaderEvaluator,
    LoadEvalError,
    OptionError,
    PairResult,
    Prediction,
    RankReport,
    Report,
    Run,
    RunHooks,
    RunLogError,
    RunSettings,
    SimResult,
    SweepHooks,
    SweepPlan,
    SweepResult,
    UtilSampler,
    WorkerFetchTimer,
    compare_runs,
    diagnose,
    gather_pair,
    gpu_status,
    load_run,
    parse_sweep,
    predict,
    predict_from_runs,
    prepare_sweep,
    rebuild_loader,
    run_ladder,
    run_pair,
    run_sweep,
    simulate,
    split_transforms,
)

__all__ = [
    "__version__",
    "LoaderEvaluator",
    "Run",
    "load_run",
    "diagnose",
    "Diagnosis",
    "Report",
    "compare_runs",
    "Comparison",
    "INPUT_BOUND",
    "PARTLY_INPUT_BOUND",
    "NOT_INPUT_BOUND",
    "NOT_ENOUGH_DATA",
    "RunSettings",
    "RunHooks",
    "run_pair",
    "PairResult",
    "run_ladder",
    "LadderResult",
    "split_transforms",
    "run_sweep",
    "SweepResult",
    "SweepHooks",
    "SweepPlan",
    "parse_sweep",
    "prepare_sweep",
    "gather_pair",
    "RankReport",
    "AutoStop",
    "simulate",
    "SimResult",
    "predict",
    "Prediction",
    "predict_from_runs",
    "WorkerFetchTimer",
    "UtilSampler",
    "gpu_status",
    "rebuild_loader",
    "plot_comparison",
    "save_report",
    "LoadEvalError",
    "OptionError",
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
    from .core import deprecated_name  # PairSettings, PairHooks: one more release

    return deprecated_name(__name__, name)
