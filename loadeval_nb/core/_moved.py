"""Names that left a public face: importable for one more release, with a
:class:`DeprecationWarning` that names where they live now."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any


def moved_name(face: str, name: str, moved: Mapping[str, str]) -> Any:
    """The object ``name`` of ``face`` now lives at ``moved[name]`` (a dotted path); warn
    and return it. Raises :class:`AttributeError` for a name that never was there."""
    where = moved.get(name)
    if where is None:
        raise AttributeError(f"module {face!r} has no attribute {name!r}")
    module, _, attr = where.rpartition(".")
    obj = getattr(importlib.import_module(module), attr)
    said = f"{face}.{name} is now {where}" if attr != name else f"{face}.{name} moved to {where}"
    if any(part.startswith("_") for part in module.split(".")[1:]):
        hint = "it is internal now, not a public name, and the old name goes in the next release"
    else:
        hint = f"import it from {module}; the old place goes in the next release"
    warnings.warn(f"{said}: {hint}.", DeprecationWarning, stacklevel=3)
    return obj


def check_sorted(module: str, names: list[str]) -> None:
    """A face's ``__all__`` is kept sorted (torch checks its own at import, too)."""
    if names != sorted(names):
        raise AssertionError(f"{module}.__all__ is not sorted")
