"""Number formatting in reports: a share too small to show is '<1%', never '0%'."""

from __future__ import annotations

import pytest

from loadeval_nb.core import fmt_pct


@pytest.mark.parametrize(
    "x, digits, text",
    [
        (0.25, 0, "25%"),
        (0.0, 0, "0%"),
        (0.004, 0, "<1%"),
        (0.005, 0, "<1%"),  # 0.5 rounds to even: "0", so still "<1%"
        (0.0051, 0, "1%"),
        (0.0004, 1, "<0.1%"),
        (-0.01, 0, "-1%"),
        (None, 0, "n/a"),
        (float("nan"), 0, "n/a"),
    ],
)
def test_fmt_pct(x, digits, text):
    assert fmt_pct(x, digits) == text
