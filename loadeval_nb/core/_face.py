"""A package's face whose names are imported on first use.

A face lists its public names once, in ``__all__``, and says where each lives once, in
its ``if TYPE_CHECKING:`` imports, which type checkers and editors read as they are. At
run time nothing is imported until a name is asked for: :func:`lazy_face` reads those
imports from the face's own source (one table per face, never kept by hand) and imports
the module a name lives in on its first use, then keeps the name in the face.

A name that is also the name of one of the package's modules (``verdict.diagnose``, the
function, beside ``verdict/diagnose.py``) is imported at once instead: importing a
submodule binds its name in the package, and the function must be what stays there (so
``import loadeval_nb.core.verdict.diagnose as m`` gives the function too, as Python reads
that statement through the package's attributes; ``sys.modules`` holds the module).

Usage, at the end of a package's ``__init__``::

    __getattr__, __dir__ = lazy_face(__name__)
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from typing import Any, Callable


def type_checking_imports(source: str) -> dict[str, tuple[str, str]]:
    """``{name: (module as import_module takes it, attribute)}`` for every ``from X import
    a as b`` inside the top-level ``if TYPE_CHECKING:`` blocks of ``source``."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module is not None:
                where = "." * stmt.level + stmt.module
                for a in stmt.names:
                    out[a.asname or a.name] = (where, a.name)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


_warned: set[str] = set()


def deprecated(old: str, new: str, goes_in: str = "0.3.0") -> None:
    """Warn once per process that ``old`` is deprecated (the project's policy: it still
    works for one more minor release, and says what replaces it), as one line."""
    if old in _warned:
        return
    _warned.add(old)
    import warnings

    warnings.warn(
        f"{old} is deprecated and goes in {goes_in}; use {new}", FutureWarning, stacklevel=3
    )


def lazy_face(name: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the face ``name`` (see the module's docstring).

    Raises ImportError at once when ``__all__`` and the ``TYPE_CHECKING`` imports do not
    name the same public names: a face must not promise a name it cannot give.
    """
    face = sys.modules[name]
    path = face.__file__ or ""
    with open(path, encoding="utf-8") as f:
        table = type_checking_imports(f.read())
    public = set(getattr(face, "__all__", ()))
    kept = {n for n in public if n in vars(face)}  # defined or imported in the face itself
    differ = sorted((public - kept) ^ set(table))
    if differ:
        raise ImportError(
            f"{name}: __all__ and its TYPE_CHECKING imports must name the same names; "
            f"they differ in {', '.join(differ)}"
        )
    package = face.__package__ or name

    def __getattr__(attr: str) -> Any:
        where = table.get(attr)
        if where is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        value = getattr(importlib.import_module(where[0], package), where[1])
        setattr(face, attr, value)  # the next use is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(face)) | public)

    setattr(face, "__getattr__", __getattr__)  # noqa: B010 (the imports below may come back to the face)
    here = os.path.dirname(path) if os.path.basename(path) == "__init__.py" else None
    for attr in table:
        if here is not None and (
            os.path.exists(os.path.join(here, attr + ".py"))
            or os.path.isdir(os.path.join(here, attr))
        ):
            __getattr__(attr)
    return __getattr__, __dir__
