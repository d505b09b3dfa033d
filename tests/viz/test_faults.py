"""Reports under faults: a write that fails keeps the previous report."""

from __future__ import annotations

import pytest


def test_a_failed_report_leaves_the_previous_one(tmp_path, monkeypatch):
    from loadeval_nb import Run, save_report

    def run(ms, mode):
        step = [int(ms * 1e6)] * 20
        return Run(mode=mode, start_ns=[i * step[0] for i in range(20)], step_ns=step)

    out = tmp_path / "report.html"
    out.write_text("the previous report")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    # the fault goes where the report is written: bokeh's file_html, as the report calls it
    monkeypatch.setattr("loadeval_nb.viz._comparison.file_html", boom)
    with pytest.raises(RuntimeError):
        save_report(run(20, "log"), run(10, "replay"), out)
    assert out.read_text() == "the previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
