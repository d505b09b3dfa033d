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

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import check_sorted

if TYPE_CHECKING:  # the names below, imported on first use (import stays cheap)
    from ._errors import (
        CacheBudgetError,
        CacheMutationWarning,
        LoadEvalError,
        OptionError,
        RunLogError,
    )
    from ._facts import Fact, Facts
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

_LAZY_NAMES = {
    "AutoStop": (".measure.adaptive", "AutoStop"),
    "CacheBudgetError": ("._errors", "CacheBudgetError"),
    "CacheMutationWarning": ("._errors", "CacheMutationWarning"),
    "Comparison": (".verdict.compare", "Comparison"),
    "Diagnosis": (".verdict.diagnosis", "Diagnosis"),
    "Fact": ("._facts", "Fact"),
    "Facts": ("._facts", "Facts"),
    "INPUT_BOUND": (".verdict.diagnosis", "INPUT_BOUND"),
    "InterleavedEvaluator": (".measure.interleave", "InterleavedEvaluator"),
    "LadderResult": (".explore.ladder", "LadderResult"),
    "LoadEvalError": ("._errors", "LoadEvalError"),
    "LoaderEvaluator": (".measure.evaluator", "LoaderEvaluator"),
    "NOT_ENOUGH_DATA": (".verdict.diagnosis", "NOT_ENOUGH_DATA"),
    "NOT_INPUT_BOUND": (".verdict.diagnosis", "NOT_INPUT_BOUND"),
    "OptionError": ("._errors", "OptionError"),
    "PARTLY_INPUT_BOUND": (".verdict.diagnosis", "PARTLY_INPUT_BOUND"),
    "PairResult": (".explore.pair", "PairResult"),
    "Prediction": (".whatif.predict", "Prediction"),
    "RankResult": (".ranks", "RankResult"),
    "RanksResult": (".ranks", "RanksResult"),
    "Run": (".record.run", "Run"),
    "RunHooks": (".explore.settings", "RunHooks"),
    "RunLogError": ("._errors", "RunLogError"),
    "RunSettings": (".explore.settings", "RunSettings"),
    "Rung": (".explore.ladder", "Rung"),
    "SCHEMA_VERSION": (".record.run", "SCHEMA_VERSION"),
    "SimResult": (".whatif.simulator", "SimResult"),
    "Stage": (".explore.ladder", "Stage"),
    "SweepHooks": (".explore.sweep_result", "SweepHooks"),
    "SweepPlan": (".explore.sweep_spec", "SweepPlan"),
    "SweepPoint": (".explore.sweep_result", "SweepPoint"),
    "SweepResult": (".explore.sweep_result", "SweepResult"),
    "TransformPart": (".explore.transforms.split", "TransformPart"),
    "TransformSplit": (".explore.transforms.split", "TransformSplit"),
    "UtilSampler": (".measure.sampler", "UtilSampler"),
    "WorkerFetchTimer": (".measure.worker_timing", "WorkerFetchTimer"),
    "compare_runs": (".verdict.compare", "compare_runs"),
    "diagnose": (".verdict.diagnose", "diagnose"),
    "gather_logs": (".ranks", "gather_logs"),
    "gather_pair": (".ranks", "gather_pair"),
    "gpu_status": (".measure.readers", "gpu_status"),
    "load_run": (".record.runlog", "load_run"),
    "parse_sweep": (".explore.sweep_spec", "parse_sweep"),
    "plan_run": (".explore.plan", "plan_run"),
    "predict": (".whatif.predict", "predict"),
    "predict_from_runs": (".whatif.from_runs", "predict_from_runs"),
    "prepare_sweep": (".explore.sweep_spec", "prepare_sweep"),
    "rebuild_loader": (".measure.loader", "rebuild_loader"),
    "run_ladder": (".explore.ladder", "run_ladder"),
    "run_pair": (".explore.pair", "run_pair"),
    "run_sweep": (".explore.sweep", "run_sweep"),
    "simulate": (".whatif.simulator", "simulate"),
    "split_transforms": (".explore.transforms.split", "split_transforms"),
    "step_path": (".measure.timing", "step_path"),
}

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


def __getattr__(name: str) -> Any:
    where = _LAZY_NAMES.get(name)
    if where is not None:  # a public name, imported on first use, then kept here
        value = getattr(importlib.import_module(where[0], __name__), where[1])
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
