"""The words of the reports (issue 14): sweep configurations named as a sweep spec writes
them, nothing saved said in words, a faster rung with a minus sign, rates with three
significant figures."""

from __future__ import annotations

import dataclasses

import pytest

from loadeval_nb import Run, diagnose
from loadeval_nb.core import LadderResult, Rung, Stage, SweepPoint, SweepResult
from loadeval_nb.core._shared import config_label

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


@pytest.mark.parametrize("saved_s", [0.0, -0.004, 3e-10])
def test_nothing_saved_is_said_in_words(saved_s):
    d = diagnose(run_of([20] * 30), run_of([10] * 30, mode="replay"))
    d = dataclasses.replace(d, time_saved_per_epoch_s=saved_s)
    fact = next(f for f in d.facts().facts if f.key == "saved")
    assert fact.text.startswith("none: an ideal loader would not shorten the")
    assert " ns" not in fact.text


def test_a_faster_rung_reads_minus_not_plus_minus():
    res = LadderResult(
        "",
        {},
        rungs=[Rung("device"), Rung("host")],
        stages=[Stage("host", "host-to-device copy", -0.0221, (0.9, 1.0), False, None)],
    )
    text = res.text()
    assert "−22.1 ms" in text and "+-" not in text and "+−" not in text


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
