"""The words of the reports (issue 14): sweep configurations named as a sweep spec writes
them, a faster rung with a minus sign, rates with three significant figures (the
verdict's words: tests/core/verdict/test_report_strings.py)."""

from __future__ import annotations

import pytest

from loadeval_nb import Run
from loadeval_nb.core._shared import config_label
from loadeval_nb.core.explore import LadderResult, Rung, Stage, SweepPoint, SweepResult

MS = 1_000_000


def run_of(step_ms, mode="log"):
    step = [int(s * MS) for s in step_ms]
    return Run(
        mode=mode,
        start_ns=[sum(step[:i]) for i in range(len(step))],
        step_ns=step,
        wait_ns=[s // 2 for s in step] if mode == "log" else None,
    )


@pytest.mark.parametrize(
    ("config", "label"),
    [
        ({"num_workers": 2}, "num_workers=2"),
        ({"num_workers": 4, "pin_memory": True}, "num_workers=4 pin_memory=True"),
        (
            {"prefetch_factor": None, "persistent_workers": False},
            "prefetch_factor=None persistent_workers=False",
        ),
        ({"num_threads": 1}, "num_threads=1"),
        ({}, "as is"),
    ],
)
def test_a_configuration_is_named_as_a_sweep_spec_writes_it(config, label):
    assert config_label(config) == label


def test_the_sweep_report_names_configurations_and_keeps_three_figures():
    cfg = {"num_workers": 2}
    points = [SweepPoint(cfg, config_label(cfg), {"num_workers": 2}, runs=[run_of([2074] * 12)])]
    ideal = run_of([1000] * 12, mode="replay")
    res = SweepResult("", {}, points=points, ideal=ideal, best=points[0])
    text = str(res)
    assert "  num_workers=2 " in text and " w2 " not in text
    assert "Recommended: num_workers=2 (0.482 steps/s" in text
    assert "ideal loader: 1.00 steps/s" in text


def test_a_faster_rung_reads_minus_not_plus_minus():
    res = LadderResult(
        "",
        {},
        rungs=[Rung("device"), Rung("host")],
        stages=[Stage("host", "host-to-device copy", -0.0221, (0.9, 1.0), False, None)],
    )
    text = res.text()
    assert "−22.1 ms" in text and "+-" not in text and "+−" not in text
