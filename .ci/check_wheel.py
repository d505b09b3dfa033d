"""Check a built wheel as a user gets it: installed alone (``--no-deps``) into a fresh
folder, imported from there (not from the checkout), with the per-step path it promises.

    python .ci/check_wheel.py dist/loadeval_nb-0.1.0-cp311-cp311-linux_x86_64.whl   # C path
    python .ci/check_wheel.py dist/loadeval_nb-0.1.0-py3-none-any.whl               # Python path

A wheel tagged for a platform must carry the C extension and load it; the pure wheel
(``py3-none-any``) must carry none and time steps in Python. Exit 0 when it holds, else 1
with one sentence. Neither torch nor numpy is needed: the check blocks both, as the path
is chosen without them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile

PROBE = (
    "import sys; sys.modules['torch'] = sys.modules['numpy'] = None\n"
    "import loadeval_nb, loadeval_nb.measure as m\n"
    "print(loadeval_nb.__file__); print(m.step_path())\n"
)


def check(wheel: str) -> str | None:
    """None when ``wheel`` holds; else the sentence that says what is wrong."""
    name = os.path.basename(wheel)
    pure = name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        ext = [n for n in z.namelist() if "_cstamp" in n and n.endswith((".so", ".pyd"))]
    if pure and ext:
        return f"{name} is tagged pure but carries {ext[0]}; build it with LOADEVAL_NB_PURE=1."
    if not pure and not ext:
        return f"{name} is tagged for a platform but has no C extension; a compiler was missing."
    with tempfile.TemporaryDirectory() as target:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
             "--disable-pip-version-check", "--target", target, wheel],
            check=True,
        )  # fmt: skip
        env = {**os.environ, "PYTHONPATH": target}
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=target
        )
        if out.returncode != 0:
            return f"{name} does not import: {out.stderr.strip().splitlines()[-1:]}"
        where, path = out.stdout.split()
        if not where.startswith(target):
            return f"{name} was not what imported ({where}); run the check outside a checkout."
    want = "Python" if pure else "C"
    if path != want:
        return f"{name} times steps with the {path} path, not the {want} path it promises."
    return None


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    bad = [m for m in (check(w) for w in argv) if m]
    for m in bad:
        print(f"check_wheel: {m}", file=sys.stderr)
    if not bad:
        print(f"check_wheel: {len(argv)} wheel(s) hold")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
