"""Static SVG charts for the saved notebook: bars with text in place of missing values."""

from __future__ import annotations

from loadeval_nb.viz import bars_svg


def test_bars_write_the_reason_where_a_value_is_missing():
    svg = bars_svg(
        [("w0", 10.0, "#111"), ("w1", "failed", "#111"), ("host", "skipped", "#222")],
        "Steps/s",
        markers=[12.0, None, None],
        ceiling=20.0,
    )
    assert svg.count("<rect x=") == 1  # one bar: the two others have none
    assert ">failed</text>" in svg and ">skipped</text>" in svg
    assert svg.count("<path ") == 1 and "stroke-dasharray" in svg  # one marker, the ceiling
