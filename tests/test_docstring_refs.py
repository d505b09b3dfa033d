"""Issue 27: every ``:mod:``, ``:class:`` and ``:func:`` reference in the package's
docstrings names something that exists (14 named modules from before the move)."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1] / "loadeval_nb"
ROLE = re.compile(r":(mod|class|func):`([^`<]+?)(?:\s*<([^>]+)>)?`")


FACES = ("", "measure", "record", "verdict", "whatif", "explore", "ranks", "errors", "viz")
"""The public faces: a bare name in a docstring may be one of their names."""


def _has(obj: object, name: str) -> bool:
    """``name`` on ``obj``; on a module, one it defines or exports (``__all__``), never a
    name a face only forwards to its new home."""
    if isinstance(obj, ModuleType):
        return name in vars(obj) or name in getattr(obj, "__all__", ())
    return hasattr(obj, name)


def _lookup(dotted: str) -> bool:
    """Whether ``a.b.c`` is a module, or an attribute reached from the longest module."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            if not _has(obj, p):
                return False
            obj = getattr(obj, p)
        return True
    return False


def resolves(target: str, module: str, is_package: bool) -> bool:
    """Sphinx's reading, as far as these docstrings use it: ``~`` only shortens the text;
    ``.x`` is beside the module (``..x`` one package up); a bare name is the module's own
    (a global, a builtin), an absolute name, or a public name of one of the faces."""
    t = target.strip().lstrip("~").removesuffix("()")
    package = module if is_package else module.rpartition(".")[0]
    if t.startswith("."):
        dots = len(t) - len(t.lstrip("."))
        base = package
        for _ in range(dots - 1):
            base = base.rpartition(".")[0]
        return _lookup(f"{base}.{t[dots:]}") or _lookup(f"{module}.{t[dots:]}")
    if _lookup(t) or _lookup(f"{module}.{t}") or _lookup(f"{package}.{t}"):
        return True
    if hasattr(builtins, t.split(".")[0]):
        return True
    return any(_lookup(f"loadeval_nb.{face}.{t}".replace("..", ".")) for face in FACES)


def references(source: str) -> list[str]:
    """Each role's target in every docstring (and attribute docstring) of ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            text = node.value.value
            if isinstance(text, str):
                out += [m.group(3) or m.group(2) for m in ROLE.finditer(text)]
    return out


def _modules() -> list[tuple[str, bool, Path]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out.append((".".join(parts[:-1] if is_package else parts), is_package, path))
    return out


def test_every_docstring_reference_resolves():
    stale = [
        f"{module}: {target}"
        for module, is_package, path in _modules()
        for target in references(path.read_text())
        if not resolves(target, module, is_package)
    ]
    assert stale == []


@pytest.mark.parametrize(
    ("target", "ok"),
    [
        (".modes", True),  # beside the module
        ("~.cache.ReplayCache", True),
        ("..whatif.simulator", True),
        ("~loadeval_nb.LoaderEvaluator", True),
        ("Run", True),  # a public name
        ("gather_pair", True),  # on a face of its own (loadeval_nb.ranks)
        ("~loadeval_nb.gather_pair", False),  # not where the face says it is
        ("._dali", False),  # a module that never was
        ("~loadeval_nb.core._worker_timing.WorkerFetchTimer", False),  # moved since
        ("~.cache.NoSuchThing", False),
    ],
)
def test_the_check_tells_a_stale_reference(target, ok):
    assert resolves(target, "loadeval_nb.core.measure.evaluator", False) is ok
