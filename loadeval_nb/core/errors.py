"""The exceptions and warnings loadeval_nb raises; each message is one sentence that
says what went wrong and what to do."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CacheBudgetError",
    "CacheMutationWarning",
    "LoadEvalError",
    "OptionError",
    "RunLogError",
]


class LoadEvalError(ValueError):
    """Bad input to loadeval_nb; the message says what to do instead."""


class OptionError(LoadEvalError):
    """A bad value for one named option.

    The message starts with the option's name as the API spells it (``steps must
    be ...``); a front end that spells it otherwise (``--steps``) asks for
    :meth:`renamed` instead of rewriting the text.
    """

    def __init__(self, option: str, rest: str) -> None:
        self.option = option
        self.rest = rest
        super().__init__(option + rest)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable and copyable like other errors
        return (type(self), (self.option, self.rest))

    def renamed(self, name: str) -> str:
        """The same sentence with the option called ``name``."""
        return name + self.rest


class CacheBudgetError(LoadEvalError):
    """The replay cache would not fit the memory budget."""


class RunLogError(LoadEvalError):
    """A run log could not be read: missing, corrupt, foreign or too new."""


class CacheMutationWarning(UserWarning):
    """The training loop changed cached batches in place, so replays saw modified data."""
