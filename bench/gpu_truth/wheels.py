"""The carried wheels (``wheels.txt``, fetched by ``prepare.sh`` into ``.whl/``) checked
before they travel: every pin there once, at its version, nothing else, for CPython 3.12 on
x86-64 Linux, and well under the 64 MiB a device call may carry.

    python -m bench.gpu_truth.wheels .whl     # what prepare.sh runs after its download
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PINS = Path(__file__).with_name("wheels.txt")
LIMIT_BYTES = 32 * 2**20  # half of what a call carries: the checkout travels too


def normalise(name: str) -> str:
    """PEP 503: ``Jupyter_Bokeh`` and ``jupyter-bokeh`` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path = PINS) -> dict[str, str]:
    """``name==version`` lines (comments and blank lines skipped) -> {name: version}."""
    pins: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        if not m:
            raise ValueError(f"{path.name}:{n}: {line!r} is not name==version; pin one version.")
        name = normalise(m.group(1))
        if name in pins:
            raise ValueError(f"{path.name}:{n}: {m.group(1)} is pinned twice; keep one line.")
        pins[name] = m.group(2)
    return pins


def wheel_tags(filename: str) -> tuple[str, str, str, str, str]:
    """``pyzmq-27.3.0-cp312-abi3-manylinux_2_28_x86_64.whl`` -> (name, version, python
    tag, abi tag, platform tag), the name normalised."""
    parts = filename[: -len(".whl")].split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise ValueError(f"{filename} is not a wheel's file name")
    name, version, *_, py, abi, plat = parts
    return normalise(name), version, py, abi, plat


def runs_here(py: str, abi: str, plat: str) -> bool:
    """A wheel CPython 3.12 on x86-64 Linux installs: pure, or built for it."""
    pys = py.split(".")
    if not any(p in ("py3", "cp312") or p.startswith(("py3", "cp3")) for p in pys):
        return False
    if abi != "none" and not any(a in ("cp312", "abi3") for a in abi.split(".")):
        return False
    if "cp3" in py and abi == "abi3":  # cp311-abi3 runs on 3.12; cp313-abi3 would not
        if not any(p.startswith("cp3") and int(p[3:] or 0) <= 12 for p in pys):
            return False
    return plat == "any" or any(p.endswith("_x86_64") for p in plat.split("."))


def problems(folder: Path, pins: dict[str, str], limit: int = LIMIT_BYTES) -> list[str]:
    """What is wrong with ``folder`` as the carried wheels (empty: nothing)."""
    out = []
    seen: dict[str, list[str]] = {}
    total = 0
    for f in sorted(folder.glob("*")):
        total += f.stat().st_size
        try:
            name, version, py, abi, plat = wheel_tags(f.name)
        except ValueError as e:
            out.append(f"{e}: remove it")
            continue
        seen.setdefault(name, []).append(version)
        if name not in pins:
            out.append(f"{f.name}: not in wheels.txt; remove it")
        elif version != pins[name]:
            out.append(f"{f.name}: wheels.txt pins {name}=={pins[name]}")
        if not runs_here(py, abi, plat):
            out.append(f"{f.name}: not for CPython 3.12 on x86-64 Linux")
    out += [
        f"{n}: {len(v)} versions ({', '.join(v)}); keep one" for n, v in seen.items() if len(v) > 1
    ]
    out += [f"{n}=={v}: missing; run prepare.sh again" for n, v in pins.items() if n not in seen]
    if total > limit:
        out.append(f"{total / 2**20:.1f} MiB of wheels: over {limit / 2**20:.0f} MiB")
    return out


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else ".whl")
    pins = read_pins()
    bad = problems(folder, pins)
    size = sum(f.stat().st_size for f in folder.glob("*")) / 2**20
    for line in bad:
        print(f"wheels: {line}")
    print(
        f"wheels: {len(list(folder.glob('*.whl')))} wheels in {folder}, {size:.1f} MiB; "
        + ("ready to carry" if not bad else f"{len(bad)} problems")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
