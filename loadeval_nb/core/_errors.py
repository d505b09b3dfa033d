"""The argument checks that raise loadeval_nb's exceptions (which live in :mod:`.errors`).

Every error message is one sentence that says what went wrong and what to do.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import (  # noqa: F401 (raised here; their home is .errors)
    CacheBudgetError,
    CacheMutationWarning,
    LoadEvalError,
    OptionError,
    RunLogError,
)


def a_kind(x: Any) -> str:
    """``x``'s type with its article, for a sentence: "an int", "a list"."""
    name = type(x).__name__
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def check_interval(name: str, value: Any) -> Any:
    """A sampling interval: seconds from 0.01 to 3600, or None for no sampling (``inf``
    crashed the sampler's thread, ``1e-9`` made it spin a core)."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.01 <= value <= 3600
    ):
        raise OptionError(
            name,
            " must be a number of seconds from 0.01 to 3600, or None to turn sampling off, "
            f"not {value!r}.",
        )
    return value


def close_match(word: str, choices: Any) -> str:
    """ " (did you mean 'x'?)" for a near miss among ``choices``, else ""."""
    import difflib

    near = difflib.get_close_matches(word, [c for c in choices if isinstance(c, str)], n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def check_int(name: str, value: Any, minimum: int, allow_none: bool = False) -> Any:
    """``value`` if it is an integer >= ``minimum`` (or None when allowed), else an
    :class:`OptionError` naming ``name``. A bool is not taken for an integer."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        hint = " or None" if allow_none else ""
        raise OptionError(name, f" must be an integer >= {minimum}{hint}, not {value!r}.")
    return value


def check_number(name: str, value: Any, what: str) -> Any:
    """``value`` if it is a finite number >= 0, else an :class:`OptionError` saying it must be
    ``what`` (e.g. "a time in seconds")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise OptionError(name, f" must be {what} >= 0, not {value!r}.")
    return value


def check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    """``value`` if it is one of ``choices``, else an :class:`OptionError` listing them."""
    if value not in choices:
        listed = " or ".join(repr(c) for c in choices)
        raise OptionError(name, f" must be {listed}, not {value!r}.")
    return value


def check_sorted(module: str, names: list[str]) -> None:
    """A face's ``__all__`` is kept sorted (torch checks its own at import, too)."""
    if names != sorted(names):
        raise AssertionError(f"{module}.__all__ is not sorted")
