"""loadeval_nb.core: measurement without Jupyter.

Imports nothing from IPython, ipywidgets or Bokeh, so it works in plain scripts,
under torchrun and in tests. Its sub-packages, one job each, from the floor up:

* ``record/``: a measured run as a record (:class:`Run`), its JSON file, the journal
  written while it runs, the rerun panel's history file;
* ``measure/``: measuring one run: :class:`LoaderEvaluator`, its two modes, the per-step
  path (and its C part), the replay cache, copy and worker timing, the utilisation
  sampler, the adaptive stop;
* ``whatif/``: what other loader settings would buy (the worker/queue simulator);
* ``verdict/``: what two runs say (:func:`diagnose`, :func:`compare_runs`);
* ``explore/``: running the user's loop to find what to change: settings, the one
  runner, the pair, the caching ladder, the sweep, the per-transform split;
* ``ranks.py``: many processes under torchrun.

Beside them, the floor every sub-package stands on: ``_errors`` (exceptions, argument
checks), ``_format`` (numbers in words), ``_stats``, ``_files`` (atomic writes),
``_facts`` (a result's facts and their rendering), ``_env`` (probes and guards).

This ``__init__`` is the layer's public face; the upper layers (viz, widgets, magic,
integrations) reach what they share but users should not see through one private
door, :mod:`loadeval_nb.core._shared`. Users meet these names through ``loadeval_nb``
and its sub-namespaces (``loadeval_nb.measure``, ``.record``, ``.verdict``, ``.whatif``,
``.explore``, ``.ranks``, ``.errors``).
"""

from __future__ import annotations

from typing import Any

from . import _shared
from ._errors import CacheBudgetError, CacheMutationWarning, LoadEvalError, OptionError, RunLogError
from ._facts import Fact, Facts
from ._moved import check_sorted, moved_name
from .explore.ladder import LadderResult, Rung, Stage, run_ladder
from .explore.pair import PairResult, run_pair
from .explore.plan import plan_run
from .explore.settings import RunHooks, RunSettings
from .explore.sweep import run_sweep
from .explore.sweep_result import SweepHooks, SweepPoint, SweepResult
from .explore.sweep_spec import SweepPlan, parse_sweep, prepare_sweep
from .explore.transforms.split import TransformPart, TransformSplit, split_transforms
from .measure.adaptive import AutoStop
from .measure.evaluator import LoaderEvaluator
from .measure.interleave import InterleavedEvaluator
from .measure.loader import rebuild_loader
from .measure.readers import gpu_status
from .measure.sampler import UtilSampler
from .measure.timing import step_path
from .measure.worker_timing import WorkerFetchTimer
from .ranks import RankResult, RanksResult, gather_logs, gather_pair
from .record.run import SCHEMA_VERSION, Run
from .record.runlog import load_run
from .verdict.compare import Comparison, compare_runs
from .verdict.diagnose import diagnose
from .verdict.diagnosis import (
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    Diagnosis,
)
from .whatif.from_runs import predict_from_runs
from .whatif.predict import Prediction, predict
from .whatif.simulator import SimResult, simulate

__all__ = [
    "AutoStop",
    "CacheBudgetError",
    "CacheMutationWarning",
    "Comparison",
    "Diagnosis",
    "Fact",
    "Facts",
    "INPUT_BOUND",
    "InterleavedEvaluator",
    "LadderResult",
    "LoadEvalError",
    "LoaderEvaluator",
    "NOT_ENOUGH_DATA",
    "NOT_INPUT_BOUND",
    "OptionError",
    "PARTLY_INPUT_BOUND",
    "PairResult",
    "Prediction",
    "RankResult",
    "RanksResult",
    "Run",
    "RunHooks",
    "RunLogError",
    "RunSettings",
    "Rung",
    "SCHEMA_VERSION",
    "SimResult",
    "Stage",
    "SweepHooks",
    "SweepPlan",
    "SweepPoint",
    "SweepResult",
    "TransformPart",
    "TransformSplit",
    "UtilSampler",
    "WorkerFetchTimer",
    "compare_runs",
    "diagnose",
    "gather_logs",
    "gather_pair",
    "gpu_status",
    "load_run",
    "parse_sweep",
    "plan_run",
    "predict",
    "predict_from_runs",
    "prepare_sweep",
    "rebuild_loader",
    "run_ladder",
    "run_pair",
    "run_sweep",
    "simulate",
    "split_transforms",
    "step_path",
]
check_sorted(__name__, __all__)

_SHARED = "loadeval_nb.core._shared"
_NEVER_PUBLIC = {
    "ranks_result",
    "check_sorted",
    "moved_name",
    "Action",
    "option_name",
    "said",
    "HistoryRow",
    "evaluator_for",
    "log_path",
    "plan_blocks",
}
MOVED = {
    # plumbing the upper layers share: behind the private door now
    **{name: f"{_SHARED}.{name}" for name in _shared.__all__ if name not in _NEVER_PUBLIC},
    # used by nothing outside core: where they live
    **{
        name: f"loadeval_nb.core.{where}.{name}"
        for where, names in {
            "_files": "atomic_open",
            "_format": "fmt_bytes fmt_pct",
            "_env": "dist_rank",
            "measure.adaptive": "mean_ci median_ci",
            "measure.loader": "TUNABLE max_workers",
            "whatif.simulator": "usable_cores",
            "verdict.compare": "parse_share",
            "explore.ladder": "STAGES",
            "explore.samples": "CachedSamples",
        }.items()
        for name in names.split()
    },
    # renamed (one word for one thing)
    "Report": "loadeval_nb.core.Facts",
    "RankReport": "loadeval_nb.core.RanksResult",
    "rank_report": f"{_SHARED}.ranks_result",
}


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name, MOVED)
