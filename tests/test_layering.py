"""The house shape: core imports nothing from Jupyter or Bokeh, layers point one way
(core → viz → widgets → integrations → magic), a layer reaches core only through its
package ``__init__`` or its one private door (``core._shared``), the docs, notebooks and
benches use public names only, no import circle exists anywhere (deferred and
``TYPE_CHECKING`` imports count), and inside core no private name crosses from one
sub-package to another."""

from __future__ import annotations

import ast
import importlib
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
CORE_FACES = ("measure", "record", "verdict", "whatif", "explore", "ranks", "errors")
"""core is a layer, not a face: its public names live on these, one home each."""
DOORS = {  # each layer's one private door, for the layers above it
    "loadeval_nb.core._shared",
    "loadeval_nb.viz._shared",
    "loadeval_nb.widgets._shared",
    "loadeval_nb.integrations._shared",
}


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
        if target in DOORS or target.rsplit(".", 1)[0] in DOORS:
            continue
        faces = {f"loadeval_nb.{theirs}"}
        if theirs == "core":
            faces = {f"loadeval_nb.core.{f}" for f in CORE_FACES}
        if target not in faces:
            bad.append(f"{where}: use a public face ({', '.join(sorted(faces))})")
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
    assert (
        seam_violations("from ..core.explore import run_pair", "loadeval_nb.widgets._cards") == []
    )
    assert seam_violations("from ..core import run_pair", "loadeval_nb.widgets._cards") != []
    assert (
        seam_violations("from ._cards import verdict_html", "loadeval_nb.widgets._dashboard") == []
    )
    assert seam_violations("from .._version import __version__", "loadeval_nb.core._env") == []
    assert seam_violations("from .core.explore import RunSettings", "loadeval_nb", True) == []


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


@pytest.mark.parametrize(
    "face, old",
    [
        ("loadeval_nb", "Diagnosis"),  # lives on loadeval_nb.verdict
        ("loadeval_nb", "Report"),  # never released: now Facts, under one name
        ("loadeval_nb.core", "fmt_seconds"),  # behind the private door
        ("loadeval_nb.core", "mean_ci"),  # in its module only
        ("loadeval_nb.core", "LoaderEvaluator"),  # core is a layer: loadeval_nb.core.measure
        ("loadeval_nb.explore", "rebuild_loader"),  # one home: loadeval_nb.measure
        ("loadeval_nb.integrations", "is_hf_trainer"),
        ("loadeval_nb.viz", "pair_html"),
        ("loadeval_nb.widgets", "report_html"),
    ],
)
def test_a_name_that_is_not_on_a_face_is_an_ordinary_attribute_error(face, old):
    import importlib
    import warnings

    mod = importlib.import_module(face)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on the way: the name simply is not there
        # (loadeval_nb.explore is loadeval_nb.core.explore: the message names its home)
        with pytest.raises(
            AttributeError, match=f"{face.split('.')[-1]}' has no attribute '{old}'"
        ):
            getattr(mod, old)
        with pytest.raises(ImportError):
            exec(f"from {face} import {old}", {})
    assert not hasattr(mod, "MOVED")


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at any depth of the code (a function's
    body, ``if TYPE_CHECKING:``): a circle closed by a deferred import is still a circle.
    ``from X import y`` counts as importing ``X.y`` when that is a module, else ``X``."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for _, target in _targets(ast.parse(path.read_text()), name, path.name == "__init__.py"):
            while target and target not in modules:
                target = target.rpartition(".")[0]  # a name in a module: the module
            if target and target != name:
                deps.add(target)
        graph[name] = deps
    # ``from .x import y`` where y is a module also names x (a package): keep the module
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not any(o.startswith(d + ".") for o in deps)}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circle_anywhere():
    assert import_circles(_graph()) == []


def test_the_circle_check_finds_a_deferred_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def floors(graph: dict[str, set[str]], inside: str) -> int:
    """How many floors the modules under ``inside`` stand on (the longest import chain
    among them, counted in modules). The sub-packages' faces are their fronts, not floors:
    nothing inside core imports one."""
    faces = {f"loadeval_nb.core.{f}" for f in CORE_FACES if (PKG / "core" / f).is_dir()}
    mods = {m for m in graph if m.startswith(inside) and m not in DOORS | faces}
    depth: dict[str, int] = {}

    def d(m: str) -> int:
        if m not in depth:
            depth[m] = 1 + max((d(x) for x in graph[m] if x in mods), default=0)
        return depth[m]

    return max(d(m) for m in mods)


def test_core_stands_on_few_floors():
    # the longest chain of imports among core's modules (11 when core was flat; 10 since
    # the pair is the evaluator's third mode: measure.base under the pair, the pair under
    # LoaderEvaluator, which gives it for mode="pair")
    assert floors(_graph(), "loadeval_nb.core.") <= 10


FLOORS = ("", "record", "measure", "whatif", "verdict", "explore", "ranks")
"""Core's sub-packages from the floor up: each imports only those below it."""


def test_core_subpackages_stand_on_each_other_in_one_order():
    graph = _graph()
    bad = []
    for module, deps in graph.items():
        if not module.startswith("loadeval_nb.core.") or module in DOORS:
            continue
        mine = FLOORS.index(_subpackage(module))
        for dep in deps:
            if dep.startswith("loadeval_nb.core.") and dep not in DOORS:
                theirs = FLOORS.index(_subpackage(dep))
                if theirs > mine:
                    bad.append(f"{module} imports {dep}, a floor above it")
    assert bad == []


def _subpackage(module: str) -> str:
    """The sub-package of core a module is in ("" for core's floor modules)."""
    parts = module.split(".")
    if len(parts) > 3:
        return parts[2]
    if parts[2].startswith("_") or parts[2] == "errors":  # the floor (errors: its face)
        return ""
    return parts[2]  # ranks.py: a job of its own


def private_crossings(source: str, module: str, is_package: bool = False) -> list[str]:
    """Imports in ``source`` (core's ``module``) of a private name, or of a private module,
    that lives in another of core's sub-packages; and floor modules reaching up into a
    sub-package (the floor stands under them all)."""
    mine = _subpackage(module)
    bad = []
    for line, target in _targets(ast.parse(source), module, is_package):
        if not target.startswith("loadeval_nb.core.") or target == module:
            continue
        theirs = _subpackage(target) if "." in target[len("loadeval_nb.core.") :] else ""
        inner = target.split(".")[3:]
        where = f"{module}:{line} imports {target}"
        if mine == "" and theirs and module not in DOORS:
            bad.append(f"{where}: a floor module must not depend on a sub-package")
        elif theirs and theirs != mine and any(p.startswith("_") for p in inner):
            bad.append(f"{where}: a private name of core.{theirs} (make it public there)")
    return bad


def test_no_private_name_crosses_core_subpackages():
    bad = []
    for path in sorted((PKG / "core").rglob("*.py")):
        name = _module_name(path)
        if name == "loadeval_nb.core":
            continue
        bad += private_crossings(path.read_text(), name, path.name == "__init__.py")
    assert bad == []


@pytest.mark.parametrize(
    "source, module",
    [
        ("from ..measure.readers import _CpuReader", "loadeval_nb.core.record.run"),
        ("from ..measure._cstamp import now", "loadeval_nb.core.explore.runner"),
        ("from .measure.timing import step_path", "loadeval_nb.core._env"),
    ],
)
def test_the_private_crossing_check_catches_one(source, module):
    assert private_crossings(source, module) != []


def test_the_private_crossing_check_allows_public_and_sibling_names():
    assert (
        private_crossings("from ..record.run import Run", "loadeval_nb.core.measure.evaluator")
        == []
    )
    assert private_crossings("from .readers import _x", "loadeval_nb.core.measure.sampler") == []
    assert (
        private_crossings("from .._errors import a_kind", "loadeval_nb.core.verdict.compare") == []
    )


@pytest.mark.parametrize(
    "face",
    ["loadeval_nb", "loadeval_nb.core._shared"]
    + [f"loadeval_nb.{f}" for f in CORE_FACES]
    + [f"loadeval_nb.core.{f}" for f in CORE_FACES],
)
def test_every_face_is_sorted_importable_and_public_only(face):
    import importlib

    mod = importlib.import_module(face)
    assert mod.__all__ == sorted(mod.__all__)
    assert [n for n in mod.__all__ if not hasattr(mod, n)] == []


def test_the_front_face_is_narrow():
    import loadeval_nb

    assert len(loadeval_nb.__all__) <= 15
    for name in loadeval_nb.__all__:  # nothing there exists only for another layer
        assert not name.startswith("_") or name == "__version__"


def test_renamed_members_are_gone():
    from loadeval_nb import Run, RunSettings, diagnose

    with pytest.raises(TypeError, match="cache"):
        RunSettings(cache=4)
    run = Run(mode="log", start_ns=[0], step_ns=[1], warmup=2)
    for old in ("warmup_steps", "loader", "to_run"):
        assert not hasattr(run, old)
    assert not hasattr(RunSettings(), "cache")
    d = diagnose(run, Run(mode="replay", start_ns=[0], step_ns=[1]))
    assert not hasattr(d, "report") and d.text()
    from loadeval_nb import LoaderEvaluator, run_pair

    with pytest.raises(TypeError, match="max_steps"):
        LoaderEvaluator([1, 2, 3], max_steps=2, sample_interval_s=None)
    ev = LoaderEvaluator([1, 2, 3], steps=2, warmup=1, sample_interval_s=None)
    assert not hasattr(ev, "warmup_steps") and not hasattr(ev, "max_steps")
    with pytest.raises(TypeError, match="repeats"):
        run_pair([1, 2], lambda loader: None, repeats=2)


def test_every_public_name_has_one_home_and_the_address_the_folders_suggest_works():
    import importlib

    from loadeval_nb.core.measure import LoaderEvaluator  # the folders' address

    homes: dict[str, list[str]] = {}
    for f in CORE_FACES:
        short, home = (importlib.import_module(f"loadeval_nb.{x}") for x in (f, f"core.{f}"))
        assert short is home  # another spelling of the same module, not a copy
        for name in home.__all__:
            homes.setdefault(name, []).append(f)
    assert {n: fs for n, fs in homes.items() if len(fs) > 1} == {}
    assert homes["LoaderEvaluator"] == ["measure"] and homes["rebuild_loader"] == ["measure"]
    import loadeval_nb

    for name in loadeval_nb.__all__:  # the front face picks from the homes, nothing of its own
        assert name == "__version__" or name in homes or name in ("plot_comparison", "save_report")
    assert loadeval_nb.LoaderEvaluator is LoaderEvaluator


def test_a_name_that_is_also_a_module_resolves_to_the_name():
    # verdict/diagnose.py beside the function diagnose: importing the module first must not
    # leave the module where the function belongs
    code = (
        "import sys, loadeval_nb.core.verdict.diagnose, loadeval_nb.core.whatif.predict\n"
        "m, p = (sys.modules[f'loadeval_nb.core.{x}'] for x in ('verdict.diagnose', 'whatif.predict'))\n"
        "from loadeval_nb.verdict import diagnose\nfrom loadeval_nb.whatif import predict\n"
        "print(callable(diagnose) and diagnose is not m, callable(predict) and predict is not p)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_a_face_whose_all_and_imports_differ_refuses_to_load(tmp_path, monkeypatch):
    pkg = tmp_path / "face_pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("A = 1\nB = 2\n")
    (pkg / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from loadeval_nb.core._face import lazy_face\n"
        "if TYPE_CHECKING:\n    from .mod import A\n"
        "__all__ = ['A', 'B']\n__getattr__, __dir__ = lazy_face(__name__)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="differ in B"):
        import face_pkg  # noqa: F401
    (pkg / "__init__.py").write_text(
        (pkg / "__init__.py").read_text().replace("import A", "import A, B")
    )
    sys.modules.pop("face_pkg", None)
    import face_pkg

    assert "A" not in vars(face_pkg) and face_pkg.A == 1 and "A" in vars(face_pkg)
    assert dir(face_pkg)[:2] == ["A", "B"]
    sys.modules.pop("face_pkg", None)


def test_the_script_child_imports_nothing_of_its_parent():
    """The runner's two processes meet in the contract (``_script/spec.py``) and the
    modules beside it, never in each other's code: a child that imported the parent's
    would run the parent's imports (and its bugs) inside the user's script."""
    graph = _graph()
    child = "loadeval_nb.integrations._script.child"
    parent = "loadeval_nb.integrations._script.parent"
    assert any(m.startswith(child + ".") for m in graph)
    reached = {
        (m, d) for m, deps in graph.items() if m.startswith(child) for d in deps
        if d.startswith(parent)
    }  # fmt: skip
    assert reached == set()
    # and the parent starts the child by its package, not by a path into it
    from loadeval_nb.integrations._script.parent.launch import CHILD_MODULE

    assert CHILD_MODULE == child


def door_users() -> dict[str, dict[str, set[str]]]:
    """Door -> each of its names -> the package modules (not the door) that import it."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    out: dict[str, dict[str, set[str]]] = {d: {} for d in DOORS}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + [node.module or ""]) if node.level else node.module
            if target in DOORS and name != target:
                for a in node.names:
                    out[target].setdefault(a.name, set()).add(name)
    return out


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_door_name_serves_package_code(door):
    # a door is for the layers' code: a name only tests used belongs at its home, where
    # the tests import it (tests/test_suite_shape.py keeps them out of the upper doors)
    names = importlib.import_module(door).__all__
    users = door_users()[door]
    assert [n for n in names if not users.get(n)] == []
