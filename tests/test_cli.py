"""python -m loadeval_nb: demo, diagnose, report."""

from __future__ import annotations

import pytest

from loadeval_nb import Run
from loadeval_nb.__main__ import main

MS = 1_000_000


@pytest.fixture
def logs(tmp_path):
    def mk(ms, mode):
        step = [ms * MS] * 20
        return Run(mode=mode, start_ns=[i * ms * MS for i in range(20)], step_ns=step).save(
            tmp_path / f"{mode}.json"
        )

    return mk(20, "log"), mk(10, "replay")


def test_diagnose_and_report(logs, tmp_path, capsys):
    assert main(["diagnose", *logs]) == 0
    assert "Verdict: INPUT-BOUND" in capsys.readouterr().out
    out = tmp_path / "r.html"
    assert main(["report", *logs, "-o", str(out)]) == 0 and out.exists()


def test_bad_path_is_one_line(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "x.json"), str(tmp_path / "y.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadeval_nb: No run log at") and "\n" not in err


def test_demo_rejects_bad_numbers(capsys):
    assert main(["demo", "--steps", "0"]) == 2
    assert "--steps must be a positive integer" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_runs_and_writes_report(tmp_path, capsys):
    out = tmp_path / "demo.html"
    assert (
        main(
            [
                "demo",
                "--steps",
                "15",
                "--warmup",
                "2",
                "--out",
                str(out),
                "--log-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "Verdict:" in text and "real step" in text
    assert out.exists() and (tmp_path / "real.json").exists() and (tmp_path / "ideal.json").exists()
