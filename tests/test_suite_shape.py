"""The suite's own shape: ``tests/core/`` mirrors core's sub-packages, and the tests reach
core's private modules only through the faces the code uses (a sub-package's modules
by their public path, the private door ``core._shared``, the floor modules)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "loadeval_nb" / "core"
TESTS = ROOT / "tests"
FLOOR = {"_errors", "_format", "_stats", "_files", "_facts", "_env"}
DOOR = "_shared"


def core_subpackages() -> set[str]:
    return {p.parent.name for p in CORE.glob("*/__init__.py") if not p.parent.name.startswith("_")}


def test_tests_core_mirrors_the_subpackages_of_core():
    folders = {p.name for p in (TESTS / "core").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == core_subpackages()
    for name in folders:
        assert (TESTS / "core" / name / "__init__.py").is_file(), name
        assert list((TESTS / "core" / name).glob("test_*.py")), f"tests/core/{name} has no tests"
    # beside the folders, a test file only for one of core's own modules (ranks.py, _format.py)
    modules = {p.stem.lstrip("_") for p in CORE.glob("*.py")}
    loose = {p.stem.removeprefix("test_") for p in (TESTS / "core").glob("test_*.py")}
    assert loose <= modules, (
        f"tests/core/test_{sorted(loose - modules)}.py: move into a sub-package"
    )


def package_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted path) of every absolute import in a test file, ``from X import _y``
    counted as ``X._y`` when ``_y`` is a module of X's package."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
            folder = ROOT.joinpath(*node.module.split("."))
            out += [
                (node.lineno, f"{node.module}.{a.name}")
                for a in node.names
                if (folder / f"{a.name}.py").is_file() or (folder / a.name).is_dir()
            ]
    return out


def core_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted path) of every loadeval_nb.core import in a test file."""
    out = package_imports(path)
    return [(line, m) for line, m in out if m.startswith("loadeval_nb.core.")]


def private_reach(module: str) -> str | None:
    """Why ``module`` (loadeval_nb.core....) is not a face the code itself uses, or None."""
    parts = module.split(".")[2:]
    if parts[0] in FLOOR or parts[0] == DOOR:
        return None if len(parts) == 1 else f"{module}: no deeper than core.{parts[0]}"
    private = [p for p in parts if p.startswith("_")]
    if private:
        return f"{module}: a private module ({private[0]}); use its sub-package or core._shared"
    return None


def test_tests_reach_core_only_through_its_faces():
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, module in core_imports(path):
            why = private_reach(module)
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert bad == []


def test_the_face_check_catches_a_private_module():
    assert private_reach("loadeval_nb.core.measure._cstamp")
    assert private_reach("loadeval_nb.core._internal")  # not one of the floors
    assert private_reach("loadeval_nb.core.measure.timing") is None
    assert private_reach("loadeval_nb.core._shared") is None
    assert private_reach("loadeval_nb.core._stats") is None


UPPER = ("viz", "widgets", "integrations", "magic")
"""The layers above core: their doors (``<layer>._shared``) are the package's, for the
layers above them; a test reaches a layer's internals at their home module, never through
its door (a door widened for tests is how 43 of 137 door names came to serve no code)."""


def upper_door_reach(module: str) -> str | None:
    """Why ``module`` (loadeval_nb.<upper layer>....) is a door a test must not use, or None."""
    parts = module.split(".")
    if len(parts) == 3 and parts[1] in UPPER and parts[2] == DOOR:
        return f"{module}: the layer's door is for package code; import the name from its home"
    return None


def upper_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted path) of every import of an upper layer's module in a test file."""
    return [
        (line, m)
        for line, m in package_imports(path)
        if m.startswith("loadeval_nb.") and m.split(".")[1:2] and m.split(".")[1] in UPPER
    ]


def test_tests_reach_the_upper_layers_at_home_not_through_their_doors():
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, module in upper_imports(path):
            why = upper_door_reach(module)
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert bad == []


def test_the_door_check_catches_a_door_above_core():
    assert upper_door_reach("loadeval_nb.widgets._shared")
    assert upper_door_reach("loadeval_nb.integrations._shared")
    assert upper_door_reach("loadeval_nb.widgets._pusher") is None
    assert upper_door_reach("loadeval_nb.integrations") is None


TIMING = ("retry_once", "excused_if_busy", "abba", "steady_mean_s")
"""tests/timing.py's helpers for a test that must sleep and compare with a stopwatch."""


def _marked_slow(decorators: list[ast.expr]) -> bool:
    return any("mark.slow" in ast.unparse(d) for d in decorators)


def unmarked_timing_tests(path: Path) -> list[str]:
    """The tests in ``path`` that use tests/timing.py's helpers (themselves, or through a
    helper of their file) and are not marked ``slow`` (nor is their class or module)."""
    tree = ast.parse(path.read_text())
    if any(
        isinstance(n, ast.Assign)
        and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
        and "slow" in ast.unparse(n.value)
        for n in tree.body
    ):
        return []

    def uses(node: ast.AST, names: set[str]) -> bool:
        return any(isinstance(c, ast.Name) and c.id in names for c in ast.walk(node))

    helpers = {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("test") and uses(n, set(TIMING))
    }
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    out = []
    for node in tree.body:
        cls = node if isinstance(node, ast.ClassDef) else None
        for f in cls.body if cls else [node]:
            if not isinstance(f, ast.FunctionDef) or not f.name.startswith("test"):
                continue
            if not uses(f, set(TIMING) | helpers):
                continue
            if not (_marked_slow(f.decorator_list) or (cls and _marked_slow(cls.decorator_list))):
                out.append(f"{where}::{f.name}")
    return out


def test_every_test_that_must_sleep_is_marked_slow():
    # the helpers' own tests run them on fake work; the GPU bench keeps its own order
    own = {TESTS / "test_timing_helpers.py"}
    bad = [
        name
        for path in sorted(TESTS.rglob("test_*.py"))
        if path not in own and "bench" not in path.parts
        for name in unmarked_timing_tests(path)
    ]
    assert bad == []


def test_the_sleep_check_catches_an_unmarked_timing_test(tmp_path):
    path = tmp_path / "test_probe.py"
    path.write_text(
        "import pytest\nfrom tests.timing import retry_once\n\n"
        "def measure():\n    return retry_once(lambda: 1)\n\n"
        "def test_a():\n    measure()\n\n"
        "@pytest.mark.slow\ndef test_b():\n    measure()\n\n"
        "def test_c():\n    pass\n"
    )
    assert unmarked_timing_tests(path) == ["test_probe.py::test_a"]
