"""loadeval_nb.errors: The exceptions and warnings loadeval_nb raises; each says in one sentence what to do."""

from __future__ import annotations

from .core import (
    CacheBudgetError,
    CacheMutationWarning,
    LoadEvalError,
    OptionError,
    RunLogError,
)

__all__ = [
    "CacheBudgetError",
    "CacheMutationWarning",
    "LoadEvalError",
    "OptionError",
    "RunLogError",
]
