"""The wheels a user installs (docs/install.md): built from the tracked files alone, the
Linux wheel carries the per-step C extension and loads it, the pure wheel carries none and
times steps in Python; both checked installed alone, outside the checkout
(.ci/check_wheel.py, which the release workflow runs too)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = sorted(
    re.findall(
        r"Programming Language :: Python :: (3\.\d+)", (ROOT / "pyproject.toml").read_text()
    ),
    key=lambda v: int(v.split(".")[1]),
)
"""The CPython versions pyproject.toml declares (its classifiers)."""
THIS = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _tracked_copy(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    return dest


def _build(src: Path, out: Path, pure: bool, python: str = sys.executable) -> Path:
    env = {**os.environ, "LOADEVAL_NB_PURE": "1" if pure else "0"}
    # this interpreter builds with the setuptools it has; another one in an isolated
    # build environment (pip fetches setuptools for it, as for a user's sdist install)
    isolation = ["--no-build-isolation"] if python == sys.executable else []
    subprocess.run(
        [python, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
         "--disable-pip-version-check", "-w", str(out), str(src)],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    (wheel,) = [p for p in out.glob("*.whl") if p.name.endswith("-py3-none-any.whl") == pure]
    return wheel


def test_the_wheel_check_refuses_a_pure_wheel_that_carries_the_extension(tmp_path):
    import zipfile

    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        from check_wheel import check
    finally:
        sys.path.remove(str(ROOT / ".ci"))
    fake = tmp_path / "loadeval_nb-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("loadeval_nb/core/measure/_cstamp.cpython-311-x86_64-linux-gnu.so", b"")
    assert "tagged pure but carries" in (check(str(fake)) or "")
    fake = tmp_path / "loadeval_nb-0.1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("loadeval_nb/__init__.py", "")
    assert "has no C extension" in (check(str(fake)) or "")


def _interpreter(version: str) -> str | None:
    """A CPython ``version`` ("3.9") on this machine: on PATH, or one pyenv installed."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = [shutil.which(f"python{version}")]
    found += sorted(
        glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}"))
    )
    for python in filter(None, found):
        said = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True,
        )  # fmt: skip
        if said.returncode == 0 and said.stdout.strip() == version:
            return python
    return None


def test_the_declared_versions_are_a_range_that_holds_this_one():
    minors = [int(v.split(".")[1]) for v in SUPPORTED]
    assert minors == list(range(minors[0], minors[-1] + 1)), SUPPORTED
    assert THIS in SUPPORTED
    requires = re.search(r'requires-python = ">=(3\.\d+)"', (ROOT / "pyproject.toml").read_text())
    assert requires and requires.group(1) == SUPPORTED[0]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the C wheel is built on Linux")
@pytest.mark.parametrize("version", SUPPORTED)
def test_each_declared_python_here_builds_and_loads_both_wheels(tmp_path, version):
    """The platform wheel carries the C path and the pure wheel the Python path, built and
    checked (installed alone, outside the checkout) with this Python and every other
    declared one the machine has."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here")
    python = sys.executable if version == THIS else _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    out = tmp_path / "dist"
    # separate copies: a build folder left by one must not leak into the other
    try:
        c_wheel = _build(_tracked_copy(tmp_path / "c"), out, pure=False, python=python)
        pure_wheel = _build(_tracked_copy(tmp_path / "pure"), out, pure=True, python=python)
    except subprocess.CalledProcessError as e:
        said = (e.stderr or b"").decode(errors="replace")
        if "No matching distribution found for setuptools" in said:
            pytest.skip(f"Python {version}'s build environment could not fetch setuptools")
        raise AssertionError(said[-2000:]) from None
    tag = "cp" + version.replace(".", "")
    assert f"-{tag}-{tag}-" in c_wheel.name and "linux" in c_wheel.name, c_wheel.name
    done = subprocess.run(
        [python, str(ROOT / ".ci" / "check_wheel.py"), str(c_wheel), str(pure_wheel)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 wheel(s) hold" in done.stdout
