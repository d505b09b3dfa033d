"""loadeval_nb.core: measurement without Jupyter.

The DataLoader wrapper (log and replay), utilisation samplers, run logs,
statistics, the diagnosis, and what runs on top of them: the real + ideal pair,
the caching ladder, the settings sweep, the adaptive stop and the worker/queue
simulator. Imports nothing from IPython, ipywidgets or Bokeh, so it works in plain
scripts, under torchrun and in tests.

This ``__init__`` is the layer's one seam: the upper layers (viz, widgets, magic),
the docs, notebooks and benches import from here, never from a ``_module``.
"""

from __future__ import annotations

from typing import Any

from ._adaptive import AutoStop, mean_ci, median_ci
from ._compare import Comparison, compare_runs, load_history, parse_share, save_history
from ._diagnosis import (
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    Diagnosis,
    as_run,
    diagnose,
)
from ._env import interrupts_deferred, is_dataloader, torch_threads
from ._errors import (
    CacheBudgetError,
    CacheMutationWarning,
    LoadEvalError,
    OptionError,
    RunLogError,
    a_kind,
    check_choice,
    check_int,
    close_match,
)
from ._evaluator import LoaderEvaluator
from ._files import atomic_open, write_text_atomic
from ._format import fmt_bytes, fmt_pct, fmt_rate, fmt_seconds, fmt_times
from ._ladder import RUNGS, STAGES, LadderResult, Rung, Stage, run_ladder
from ._loader import (
    TUNABLE,
    check_workers,
    loader_knobs,
    max_workers,
    rebuild_loader,
    shutdown_persistent_workers,
)
from ._pair import PairResult, run_pair
from ._predict import Prediction, predict
from ._ranks import RankReport, RankResult, dist_rank, gather_pair, rank_report
from ._readers import gpu_status
from ._report import Fact, Report
from ._run import Run
from ._runlog import SCHEMA_VERSION, load_run
from ._runner import PAIR_NEEDS_TWO_PASSES, check_writable_dir, refuse_one_shot
from ._samplers import UtilSampler
from ._samples import CachedSamples
from ._settings import RunHooks, RunSettings, deprecated_name
from ._simulator import SimResult, simulate, usable_cores
from ._sweep import run_sweep
from ._sweep_result import SweepHooks, SweepPoint, SweepResult
from ._sweep_spec import SweepPlan, config_label, parse_sweep, prepare_sweep
from ._timing import step_path
from ._transform_split import TransformPart, TransformSplit, split_transforms
from ._whatif import predict_from_runs
from ._worker_timing import WorkerFetchTimer

__all__ = [
    # the wrapper and its records
    "LoaderEvaluator",
    "Run",
    "load_run",
    "SCHEMA_VERSION",
    "UtilSampler",
    "gpu_status",
    "WorkerFetchTimer",
    # the verdict
    "diagnose",
    "Diagnosis",
    "as_run",
    "INPUT_BOUND",
    "PARTLY_INPUT_BOUND",
    "NOT_INPUT_BOUND",
    "NOT_ENOUGH_DATA",
    "Report",
    "Fact",
    "compare_runs",
    "Comparison",
    "parse_share",
    "save_history",
    "load_history",
    # running the user's loop: pair, ladder, sweep
    "RunSettings",
    "RunHooks",
    "run_pair",
    "PairResult",
    "run_ladder",
    "LadderResult",
    "Rung",
    "Stage",
    "RUNGS",
    "STAGES",
    "CachedSamples",
    "split_transforms",
    "TransformSplit",
    "TransformPart",
    "run_sweep",
    "SweepResult",
    "SweepPoint",
    "SweepHooks",
    "SweepPlan",
    "parse_sweep",
    "prepare_sweep",
    "config_label",
    "refuse_one_shot",
    "check_writable_dir",
    # many ranks (torchrun)
    "gather_pair",
    "RankReport",
    "RankResult",
    "rank_report",
    "dist_rank",
    "PAIR_NEEDS_TWO_PASSES",
    # adaptive stop and the simulator
    "AutoStop",
    "median_ci",
    "mean_ci",
    "simulate",
    "SimResult",
    "predict",
    "Prediction",
    "predict_from_runs",
    "usable_cores",
    # loaders
    "rebuild_loader",
    "loader_knobs",
    "TUNABLE",
    "check_workers",
    "max_workers",
    "shutdown_persistent_workers",
    "is_dataloader",
    "interrupts_deferred",
    "step_path",
    "torch_threads",
    # errors and formatting
    "LoadEvalError",
    "OptionError",
    "CacheBudgetError",
    "RunLogError",
    "CacheMutationWarning",
    "fmt_seconds",
    "fmt_bytes",
    "fmt_pct",
    "fmt_times",
    "fmt_rate",
    "atomic_open",
    "write_text_atomic",
    "check_int",
    "check_choice",
    "a_kind",
    "close_match",
]


def __getattr__(name: str) -> Any:
    # PairSettings / PairHooks: importable for one more release, with a DeprecationWarning
    return deprecated_name(__name__, name)
