"""loadeval_nb.verdict: What two runs say: the diagnosis of a real and an ideal run, and the CI comparison of two runs."""

from __future__ import annotations

from .core import (
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    Comparison,
    Diagnosis,
    Fact,
    Facts,
    compare_runs,
    diagnose,
)

__all__ = [
    "Comparison",
    "Diagnosis",
    "Fact",
    "Facts",
    "INPUT_BOUND",
    "NOT_ENOUGH_DATA",
    "NOT_INPUT_BOUND",
    "PARTLY_INPUT_BOUND",
    "compare_runs",
    "diagnose",
]
