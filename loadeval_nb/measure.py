"""loadeval_nb.measure: Measuring one run: the DataLoader wrapper and what it reads while the loop runs."""

from __future__ import annotations

from .core import (
    AutoStop,
    InterleavedEvaluator,
    LoaderEvaluator,
    UtilSampler,
    WorkerFetchTimer,
    gpu_status,
    step_path,
)

__all__ = [
    "AutoStop",
    "InterleavedEvaluator",
    "LoaderEvaluator",
    "UtilSampler",
    "WorkerFetchTimer",
    "gpu_status",
    "step_path",
]
