"""loadeval_nb.whatif: What other loader settings would buy: the worker/queue simulator and its predictions."""

from __future__ import annotations

from .core import (
    Prediction,
    SimResult,
    predict,
    predict_from_runs,
    simulate,
)

__all__ = [
    "Prediction",
    "SimResult",
    "predict",
    "predict_from_runs",
    "simulate",
]
