"""The words of the verdict (issue 14): nothing saved said in words, and advice on waits
that follows the simulator without repeating it."""

from __future__ import annotations

import dataclasses

import pytest

from loadeval_nb import Run, diagnose

MS = 1_000_000


def run_of(step_ms, mode="log"):
    step = [int(s * MS) for s in step_ms]
    return Run(
        mode=mode,
        start_ns=[sum(step[:i]) for i in range(len(step))],
        step_ns=step,
        wait_ns=[s // 2 for s in step] if mode == "log" else None,
    )


@pytest.mark.parametrize("saved_s", [0.0, -0.004, 3e-10])
def test_nothing_saved_is_said_in_words(saved_s):
    d = diagnose(run_of([20] * 30), run_of([10] * 30, mode="replay"))
    d = dataclasses.replace(d, time_saved_per_epoch_s=saved_s)
    fact = next(f for f in d.facts().facts if f.key == "saved")
    assert fact.text.startswith("none: an ideal loader would not shorten the")
    assert " ns" not in fact.text


@pytest.mark.parametrize(
    ("prediction", "says"),
    [
        (
            "with num_workers=4: about 2.0× faster (loading mostly waits, so workers need not "
            "have a core each)",
            "add DataLoader workers (with num_workers=4: about 2.0× faster). If more",
        ),
        (
            "with num_workers=6: about 1.4× faster, still short of the loader-free speed on "
            "2 cores: loading itself must get cheaper to go further.",
            "add DataLoader workers (with num_workers=6: about 1.4× faster). If more",
        ),
        (
            "no num_workers setting gets within 5 % of the loader-free speed on 2 cores, nor "
            "beats num_workers=2: loading itself must get cheaper.",
            "more workers would not help (see the simulator's line); the per-sample work",
        ),
        (None, "add DataLoader workers. If more workers do not help"),
    ],
)
def test_the_advice_on_waits_follows_the_simulator_without_repeating_it(prediction, says):
    d = diagnose(run_of([20] * 30), run_of([10] * 30, mode="replay"))
    d = dataclasses.replace(d, prediction=prediction)
    advice = next(f for f in d.facts().facts if f.key == "advice").text
    assert advice.startswith("The loop waits for data 50% of the time: ")
    assert says in advice and advice.count("(") == advice.count(")") <= 2
    assert "((" not in advice and "))" not in advice
