"""A label says only what its interval supports (issue 36): decided from the interval
against the two lines (a gain under 5 % is not worth a change, one over 25 % is large),
never from the point estimate; an interval across a line says its range in words."""

from __future__ import annotations

import random

import pytest

from loadeval_nb import Run, diagnose
from loadeval_nb.core.verdict import (
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
)
from loadeval_nb.core.verdict.diagnose import _verdict, steps_to_tell
from loadeval_nb.core.verdict.diagnosis import advice

WORTH, LARGE = 1 / 0.95, 1.25
MS = 1_000_000


@pytest.mark.parametrize(
    ("ci", "label", "words"),
    [
        # the cases, each labelled as its interval allows
        ((0.70, 1.60), NOT_ENOUGH_DATA, "between 0.70× and 1.60× as fast: too wide"),
        ((0.59, 1.64), NOT_ENOUGH_DATA, "between 0.59× and 1.64× as fast"),
        ((0.94, 2.38), NOT_ENOUGH_DATA, "between 0.94× and 2.38× as fast"),
        ((1.00, 1.09), NOT_ENOUGH_DATA, "between 1.00× and 1.09× as fast: at most 9% faster"),
        ((0.97, 1.04), NOT_INPUT_BOUND, "at most 4% faster, under the 5% a change is worth"),
        ((1.01, 1.04), NOT_INPUT_BOUND, "between 1.01× and 1.04× as fast"),
        ((0.84, 0.95), NOT_INPUT_BOUND, "the real loader measured faster than an ideal one"),
        ((1.06, 1.13), PARTLY_INPUT_BOUND, "between 1.06× and 1.13× as fast: at least 6%"),
        ((1.10, 1.60), PARTLY_INPUT_BOUND, "at least 10%; possibly much more"),
        ((1.25, 1.40), INPUT_BOUND, "between 1.25× and 1.40× as fast: at least 25%"),
        ((2.52, 3.76), INPUT_BOUND, "at least 152%"),
    ],
)
def test_the_label_is_the_intervals(ci, label, words):
    got, reason = _verdict(100, 100, 0.1, ci)
    assert got == label
    assert words in reason, reason


def test_no_label_contradicts_its_interval_over_many_constructed_pairs():
    # pairs of every gain and noise: NOT only under the first line, INPUT-BOUND only over
    # the second, PARTLY only over the first, and an interval across the first line is
    # never a label: so two runs whose intervals overlap never get labels that contradict
    rng = random.Random(3)
    seen = set()
    for k in range(120):
        gain = rng.uniform(0.9, 1.6)
        rel = rng.choice([0.02, 0.1, 0.4])
        n = rng.choice([20, 60, 200])
        real = [10 * gain * max(0.05, rng.gauss(1, rel)) for _ in range(n)]
        ideal = [10 * max(0.05, rng.gauss(1, rel)) for _ in range(n)]
        d = diagnose(run_of(real), run_of(ideal, mode="replay"), seed=k)
        lo, hi = d.speedup_ci
        seen.add(d.verdict)
        if d.verdict == NOT_INPUT_BOUND:
            assert hi < WORTH
        elif d.verdict == INPUT_BOUND:
            assert lo >= LARGE
        elif d.verdict == PARTLY_INPUT_BOUND:
            assert lo >= WORTH
        else:
            assert lo < WORTH <= hi or (lo < LARGE <= hi and lo < WORTH)
    assert seen == {NOT_INPUT_BOUND, PARTLY_INPUT_BOUND, INPUT_BOUND, NOT_ENOUGH_DATA}


def test_an_interval_across_the_line_says_how_many_steps_would_tell():
    # a noisy 1.10x: its interval lies across the 5 % line; the advice names the steps
    # a side that would narrow it to one side, in the front end's own words
    rng = random.Random(7)
    real = [11 * max(0.05, rng.gauss(1, 0.3)) for _ in range(40)]
    ideal = [10 * max(0.05, rng.gauss(1, 0.3)) for _ in range(40)]
    d = diagnose(run_of(real), run_of(ideal, mode="replay"))
    assert d.verdict == NOT_ENOUGH_DATA, d.speedup_ci
    assert d.steps_to_tell is not None and d.steps_to_tell > 40
    assert d.steps_to_tell % 50 == 0
    pieces = advice(d)
    assert any(getattr(p, "value", None) == d.steps_to_tell for p in pieces), pieces
    # the estimate: the width shrinks as one over the square root of the steps
    # 1.02-1.40x: its middle (1.195x) is 0.127 from the line in logs, its half-width 0.158
    assert steps_to_tell(100, (1.02, 1.40)) == pytest.approx(
        100 * (0.158 / 0.127) ** 2 * 1.2, rel=0.05
    )
    assert steps_to_tell(100, (1.06, 1.12)) is None  # across no line
    assert steps_to_tell(100, (1.0, 1.11)) is None  # 1.053 is its middle: cannot be told


def run_of(step_ms, mode="log"):
    step = [int(s * MS) for s in step_ms]
    start = [sum(step[:i]) for i in range(len(step))]
    return Run(mode=mode, start_ns=start, step_ns=step, samples=[8] * len(step), warmup=0)
