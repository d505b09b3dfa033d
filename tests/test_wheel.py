"""The wheels a user installs (docs/install.md): built from the tracked files alone, the
Linux wheel carries the per-step C extension and loads it, the pure wheel carries none and
times steps in Python; both checked installed alone, outside the checkout
(.ci/check_wheel.py, which the release workflow runs too)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_copy(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    return dest


def _build(src: Path, out: Path, pure: bool) -> Path:
    env = {**os.environ, "LOADEVAL_NB_PURE": "1" if pure else "0"}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(out), str(src)],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    (wheel,) = [p for p in out.glob("*.whl") if p.name.endswith("-py3-none-any.whl") == pure]
    return wheel


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the C wheel is built on Linux")
def test_the_linux_wheel_carries_the_c_path_and_the_pure_wheel_the_python_path(tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here")
    out = tmp_path / "dist"
    # separate copies: a build folder left by one must not leak into the other
    c_wheel = _build(_tracked_copy(tmp_path / "c"), out, pure=False)
    pure_wheel = _build(_tracked_copy(tmp_path / "pure"), out, pure=True)
    assert "-linux_" in c_wheel.name or "manylinux" in c_wheel.name
    check = [sys.executable, str(ROOT / ".ci" / "check_wheel.py")]
    done = subprocess.run(
        [*check, str(c_wheel), str(pure_wheel)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "2 wheel(s) hold" in done.stdout


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
