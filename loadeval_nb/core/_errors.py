"""Exceptions and warnings raised by loadeval_nb.

Every error message is one sentence that says what went wrong and what to do.
"""

from __future__ import annotations

__all__ = ["LoadEvalError", "CacheBudgetError", "RunLogError", "CacheMutationWarning"]


class LoadEvalError(ValueError):
    """Bad input to loadeval_nb; the message says what to do instead."""


class CacheBudgetError(LoadEvalError):
    """The replay cache would not fit the memory budget."""


class RunLogError(LoadEvalError):
    """A run log could not be read: missing, corrupt, foreign or too new."""


class CacheMutationWarning(UserWarning):
    """The training loop changed cached batches in place, so replays saw modified data."""
