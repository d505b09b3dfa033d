"""The house shape: core imports nothing from Jupyter or Bokeh, layers point one way
(core → viz → widgets → integrations → magic), and a layer reaches another only through
that layer's
package ``__init__`` — as do the docs, notebooks and benches."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "loadeval_nb"
FORBIDDEN = ("IPython", "ipywidgets", "bokeh", "jupyter_bokeh")
LAYERS = ("core", "viz", "widgets", "integrations", "magic")
SHARED = {"loadeval_nb._version"}  # the package's version: anyone may read it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _targets(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``tree``; ``from X import _y`` counts as
    importing ``X._y`` (a private submodule or name reached through X)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            out += [
                (node.lineno, f"{target}.{a.name}") for a in node.names if a.name.startswith("_")
            ]
    return out


def seam_violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """Imports in ``source`` (the text of ``module``) that cross a layer other than through
    its package ``__init__``, or that point up the layers."""
    mine = _layer(module)
    bad = []
    for line, target in _targets(ast.parse(source), module, is_package):
        if not target.startswith("loadeval_nb.") or target in SHARED:
            continue
        theirs = _layer(target)
        if theirs is None or theirs == mine:
            continue
        where = f"{module}:{line} imports {target}"
        if target != f"loadeval_nb.{theirs}":
            bad.append(f"{where}: use the public loadeval_nb.{theirs}")
        elif mine is not None and LAYERS.index(theirs) > LAYERS.index(mine):
            bad.append(
                f"{where}: {mine} must not depend on {theirs} (core → viz → widgets → integrations → magic)"
            )
    return bad


def test_layers_meet_only_at_their_package_init():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        bad += seam_violations(path.read_text(), _module_name(path), path.name == "__init__.py")
    assert bad == []


@pytest.mark.parametrize(
    "source, module",
    [
        ("from ..core._pair import run_pair", "loadeval_nb.widgets._dashboard"),
        ("from loadeval_nb.viz._svg import steps_svg", "loadeval_nb.magic._session"),
        ("from ..core import _format", "loadeval_nb.viz._data"),
        ("import loadeval_nb.core._run", "loadeval_nb.demo"),
        ("from ..widgets import Dashboard", "loadeval_nb.core._pair"),  # upward
    ],
)
def test_the_seam_check_catches_a_crossing(source, module):
    assert seam_violations(source, module) != []


def test_the_seam_check_allows_public_and_same_layer_imports():
    assert seam_violations("from ..core import run_pair", "loadeval_nb.widgets._cards") == []
    assert (
        seam_violations("from ._cards import verdict_html", "loadeval_nb.widgets._dashboard") == []
    )
    assert seam_violations("from .._version import __version__", "loadeval_nb.core._env") == []
    assert seam_violations("from .core import RunSettings", "loadeval_nb", is_package=True) == []


PRIVATE = re.compile(r"loadeval_nb(\.[a-z_]+)*\._[a-z]\w*")


@pytest.mark.parametrize("folder", ["docs", "notebooks", "bench", "README.md"])
def test_docs_notebooks_and_benches_use_public_names_only(folder):
    path = ROOT / folder
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    hits = [
        f"{f.relative_to(ROOT)}: {m.group(0)}"
        for f in files
        if f.suffix in (".md", ".py", ".ipynb")
        for m in PRIVATE.finditer(f.read_text())
    ]
    assert hits == []


@pytest.mark.parametrize("module", ["loadeval_nb.core", "loadeval_nb"])
def test_core_loads_no_jupyter_or_bokeh(module):
    code = (
        f"import sys, {module}\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"


def test_viz_is_lazy_but_reachable():
    import loadeval_nb

    assert callable(loadeval_nb.plot_comparison) and callable(loadeval_nb.save_report)
    with pytest.raises(AttributeError):
        loadeval_nb.not_a_thing


@pytest.mark.parametrize("package", ["loadeval_nb", "loadeval_nb.core"])
def test_old_names_still_import_with_a_deprecation_warning(package):
    import importlib

    from loadeval_nb import RunHooks, RunSettings

    mod = importlib.import_module(package)
    with pytest.warns(DeprecationWarning, match="PairSettings is now RunSettings"):
        assert mod.PairSettings is RunSettings
    with pytest.warns(DeprecationWarning, match="PairHooks is now RunHooks"):
        assert mod.PairHooks is RunHooks


def test_every_public_name_is_importable():
    import loadeval_nb
    import loadeval_nb.core

    for mod in (loadeval_nb, loadeval_nb.core):
        missing = [n for n in mod.__all__ if not hasattr(mod, n)]
        assert missing == []


MAX_MODULE_LINES = 400


def test_no_module_holds_two_jobs():
    # a module past ~400 lines usually does two things: split it, one job a room
    big = {
        str(p.relative_to(ROOT)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert big == {}
