"""The status line says a disturbed pair in its headline, and its text is words."""

from __future__ import annotations

import dataclasses

from loadeval_nb import Run, diagnose
from loadeval_nb.explore import PairResult
from loadeval_nb.widgets import Dashboard

MS = 1_000_000


def _diagnosis(**changes):
    def run_of(ms, mode):
        step = [int(ms * MS)] * 30
        return Run(mode=mode, start_ns=[i * step[0] for i in range(30)], step_ns=step)

    return dataclasses.replace(diagnose(run_of(20, "log"), run_of(10, "replay")), **changes)


def test_a_disturbed_pair_says_so_in_the_headline():
    dash = Dashboard(loader_name="x", steps_per_run=30)
    d = _diagnosis(disturbed=["ideal"])
    dash.pair_done(PairResult(label="#1", loader_settings={}, diagnosis=d))
    assert "Disturbed: other work ran during the ideal run" in dash.status.value
    assert "#b35c00" in dash.status.value
    text = dash.status_text()
    assert text.startswith("Done: INPUT-BOUND") and "<" not in text
    quiet = Dashboard(loader_name="x", steps_per_run=30)
    quiet.pair_done(PairResult(label="#1", loader_settings={}, diagnosis=_diagnosis()))
    assert "Disturbed" not in quiet.status.value
    dash.close()
    quiet.close()
