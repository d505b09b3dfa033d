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


def test_the_done_line_says_the_interval_not_a_point():
    # under NOT ENOUGH DATA the line stated a point speedup ("would be 1.21× as fast")
    dash = Dashboard(loader_name="x", steps_per_run=30)
    d = _diagnosis(verdict="NOT ENOUGH DATA", speedup=1.21, speedup_ci=(0.88, 1.58))
    dash.pair_done(PairResult(label="#1", loader_settings={}, diagnosis=d))
    text = dash.status_text()
    assert "between 0.88× and 1.58× as fast" in text and "1.21" not in text
    dash.close()
