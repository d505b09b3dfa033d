"""Plans checked once: a front end (the magic, the CLI, a script) asks for the checks of a
pair, a ladder or a sweep before anything runs; the runner then does not make them again."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..errors import LoadEvalError
from .ladder import check_ladder
from .pair import check_pair
from .runner import check_loader_and_settings
from .settings import RunSettings
from .sweep import check_sweep

KINDS = ("pair", "ladder", "sweep")


def plan_run(
    kind: str,
    loader: Any,
    settings: Optional[RunSettings] = None,
    *,
    loader_name: str = "the loader",
    spelling: str = "keywords",
) -> RunSettings:
    """``settings`` checked for a ``kind`` run (``pair``, ``ladder`` or ``sweep``) of
    ``loader`` before anything runs: a one-shot iterator where the loop runs more than
    once, a ``log_dir`` that cannot be written, an empty loader, options that do not apply
    (``repeat`` or ``only`` with a ladder or a sweep) are refused in one sentence, which
    names settings as the front end spells them (``spelling="options"``: ``--log-dir``).
    Returns the settings marked checked, for :func:`run_pair`, :func:`run_ladder` or
    :func:`run_sweep`."""
    if kind not in KINDS:
        raise LoadEvalError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}.")
    settings = check_loader_and_settings(loader, settings)
    if kind == "pair":
        check_pair(loader, settings, loader_name, spelling)
    elif kind == "ladder":
        check_ladder(loader, settings, loader_name, spelling)
    else:
        check_sweep(loader, settings, loader_name, spelling)
    return dataclasses.replace(settings, checked=True)
