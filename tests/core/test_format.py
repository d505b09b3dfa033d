"""Number formatting in reports: a share too small to show is '<1%', never '0%'."""

from __future__ import annotations

import pytest

from loadeval_nb.core._format import fmt_pct


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
        (1.0, "1.00"),  # trailing zeros are significant figures too
        (17.0, "17.0"),
        (99.96, "100"),  # not "100."
        (9.996, "10.0"),
        (0, "0"),
        (None, "n/a"),
    ],
)
def test_rates_keep_three_significant_figures(x, text):
    from loadeval_nb.core._shared import fmt_rate

    assert fmt_rate(x) == text


@pytest.mark.parametrize(
    ("s", "text"),
    [
        (0.0203, "20.3 ms"),
        (4e-7, "400 ns"),
        (3e-10, "<1 ns"),  # too short to show is not zero
        (-3e-10, "-<1 ns"),
        (0.0, "0 ns"),
        (None, "n/a"),
    ],
)
def test_fmt_seconds_never_rounds_a_duration_to_zero(s, text):
    from loadeval_nb.core._shared import fmt_seconds

    assert fmt_seconds(s) == text
