"""Running ``python -m loadeval_nb run`` on the scripts in ``fixtures/`` as a user would."""

from __future__ import annotations

import contextlib
import glob
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Optional

import psutil

from loadeval_nb import Run, load_run

FIXTURES = Path(__file__).with_name("fixtures")
MARK = "LOADEVAL_NB_TEST_SESSION"
SESSION = uuid.uuid4().hex
"""Every process these tests start carries it in its environment (its descendants too:
DataLoader workers, torch's launcher and its ranks), so leftovers are told from the
processes of anyone else running the same scripts on the machine."""


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def env() -> dict[str, str]:
    out = dict(os.environ)
    out.pop("CUDA_VISIBLE_DEVICES", None)
    out["PYTHONWARNINGS"] = "ignore"  # the frameworks' deprecation notes are not ours to read
    out[MARK] = SESSION
    return out


def loadeval(
    *args: str, timeout: float = 300, extra_env: Optional[dict[str, str]] = None
) -> subprocess.CompletedProcess[str]:
    """``python -m loadeval_nb ARGS``, its output captured (``extra_env`` added to the
    environment)."""
    return subprocess.run(
        [sys.executable, "-m", "loadeval_nb", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**env(), **(extra_env or {})},
    )


def fresh(tmp_path: Path) -> Path:
    """A new empty folder under ``tmp_path`` (a retried test's try gets its own)."""
    k = 1
    while (tmp_path / f"try{k}").exists():
        k += 1
    (tmp_path / f"try{k}").mkdir()
    return tmp_path / f"try{k}"


def runs(log_dir: Path, rank: Optional[int] = None) -> tuple[Run, Run]:
    """The real and the ideal run a command wrote in ``log_dir``."""
    tail = f"-rank{rank}" if rank is not None else ""
    out = []
    for which in ("real", "ideal"):
        (path,) = glob.glob(str(log_dir / f"*-{which}{tail}.json"))
        out.append(load_run(path))
    return out[0], out[1]


def leftovers() -> list[str]:
    """Processes these tests started still running anywhere on the machine (an orphan is
    no longer our child, so the suite's own leak check would not see it)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(MARK) == SESSION:
                out.append(f"{p.info['pid']}: {' '.join(p.info['cmdline'] or [])}")
    return out
