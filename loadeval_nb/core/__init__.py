"""loadeval_nb.core: measurement without Jupyter.

The DataLoader wrapper (log and replay), utilisation samplers, run logs,
statistics and the diagnosis. Imports nothing from IPython, ipywidgets or
Bokeh, so it works in plain scripts, under torchrun and in tests.
"""

from __future__ import annotations

from ._diagnosis import (
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    Diagnosis,
    as_run,
    diagnose,
)
from ._errors import CacheBudgetError, CacheMutationWarning, LoadEvalError, RunLogError
from ._evaluator import LoaderEvaluator
from ._run import SCHEMA_VERSION, Run, load_run
from ._samplers import UtilSampler, gpu_status

__all__ = [
    "LoaderEvaluator",
    "Run",
    "load_run",
    "SCHEMA_VERSION",
    "diagnose",
    "Diagnosis",
    "as_run",
    "INPUT_BOUND",
    "PARTLY_INPUT_BOUND",
    "NOT_INPUT_BOUND",
    "NOT_ENOUGH_DATA",
    "UtilSampler",
    "gpu_status",
    "LoadEvalError",
    "CacheBudgetError",
    "RunLogError",
    "CacheMutationWarning",
]
