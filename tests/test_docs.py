"""The README's promises: CI runs its test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text)


def test_ci_runs_the_readme_test_command():
    cmds = readme_commands()
    test_cmd = next(c for c in cmds if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci


def test_readme_demo_command_installs_cpu_torch_first():
    demo = next(c for c in readme_commands() if "demo" in c)
    assert demo.startswith("pip install torch==2.13.0 && ")
