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


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (17.345, "17.3"),
        (0.48212, "0.482"),
        (1234.4, "1,234"),
        (123.6, "124"),
        (0, "0"),
        (None, "n/a"),
    ],
)
def test_rates_keep_three_significant_figures(x, text):
    from loadeval_nb.core import fmt_rate

    assert fmt_rate(x) == text
