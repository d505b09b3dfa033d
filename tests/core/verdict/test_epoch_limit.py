"""--steps auto at the epoch's end: when the loader ran out of batches before the step time
was known to the precision asked, the note says the epoch is the limit, not "more steps"
(issue 20, item 4)."""

from __future__ import annotations

import json

import numpy as np

from loadeval_nb import Run, diagnose

MS = 1_000_000
AUTO = {"rel": 0.05, "min_steps": 30, "max_steps": 2000, "check_every": 10}


def _run(mode, ms, stops, n=40):
    rng = np.random.default_rng(1)
    step = [int((ms + rng.normal(0, ms / 3)) * MS) for _ in range(n)]
    per = n // len(stops)
    return Run(
        mode=mode,
        start_ns=[sum(step[:i]) for i in range(n)],
        step_ns=step,
        block=[min(k // per, len(stops) - 1) for k in range(n)],
        blocks=[{"status": "complete", "steps": per, "auto_stop": s} for s in stops],
        settings={"auto_stop": AUTO, "max_steps": 2000},
    )


def _not_converged(d):
    return [n for n in d.notes if n.startswith("not converged")]


def test_an_exhausted_loader_says_the_epoch_is_the_limit():
    d = diagnose(_run("log", 20, ["loader exhausted"]), _run("replay", 10, ["converged"]))
    (note,) = _not_converged(d)
    assert note.startswith("not converged: the real run stopped (loader exhausted)")
    assert "known to ±5 %" in note and "the epoch is the limit" in note
    assert "more steps" not in note
    assert "did not converge: the epoch is the limit" in d.reason


def test_every_epoch_exhausted_is_still_the_epoch_s_limit():
    two = ["loader exhausted", "loader exhausted"]
    d = diagnose(_run("log", 20, ["converged"]), _run("replay", 10, two))
    (note,) = _not_converged(d)
    assert "the ideal run stopped" in note and "the epoch is the limit" in note


def test_a_step_cap_still_asks_for_more_steps():
    d = diagnose(_run("log", 20, ["max_steps"]), _run("replay", 10, ["converged"]))
    (note,) = _not_converged(d)
    assert "(max_steps)" in note and "more steps" in note
    assert "epoch is the limit" not in note and "epoch is the limit" not in d.reason


def test_not_enough_data_at_the_epoch_s_end_advises_epochs_not_steps():
    few = _run("log", 20, ["loader exhausted"], n=8)
    d = diagnose(few, _run("replay", 10, ["converged"], n=8))
    assert d.verdict == "NOT ENOUGH DATA"
    advice = next(f for f in d.facts().facts if f.key == "advice")
    assert "epoch is the limit" in advice.text
    assert not any(getattr(p, "setting", None) == "steps" for p in advice.pieces)


def test_an_interleaved_pass_over_a_loader_without_len_is_never_epoch_limited():
    # its blocks are the run's epochs, not the loader's: a block of 13 steps is no epoch
    from loadeval_nb.core.record import Run
    from loadeval_nb.core.verdict import diagnose

    plan = {"block": 13, "blocks": 2, "drain": 1, "settle": 1, "epoch": None, "ranks": 1}
    steps = [1_000_000] * 28
    epoch = [0] * 14 + [1] * 14
    real = Run(mode="log", start_ns=list(range(28)), step_ns=steps, block=epoch, warmup=1,
               settings={"steps": 60, "interleaved": plan})  # fmt: skip
    ideal = Run(mode="replay", start_ns=list(range(28)), step_ns=steps, block=epoch, warmup=1,
                settings={"steps": 60, "interleaved": plan})  # fmt: skip
    d = diagnose(real, ideal)
    assert d.loader_limited is None and "short_loader" not in d.noted


def test_the_plan_s_word_and_a_stream_that_ran_out_are_both_the_epoch_s_limit():
    """The plan says when the epoch set its blocks (``epoch_limited``); a loader with no
    len() to plan by that ran out (``epoch_seen``) is the epoch's limit all the same."""
    from loadeval_nb.core.record import Run
    from loadeval_nb.core.verdict.diagnose import loader_limited

    def run(plan):
        return Run(mode="log", start_ns=list(range(28)), step_ns=[1_000_000] * 28,
                   block=[0] * 14 + [1] * 14, warmup=5, status="complete",
                   loader_settings={"len": plan["epoch"]},
                   settings={"steps": 60, "num_cached_batches": 4, "interleaved": plan})  # fmt: skip

    base = {"block": 13, "blocks": 2, "drain": 1, "settle": 1, "ranks": 1}
    ran_out = {**base, "epoch": None, "epoch_seen": 75, "epoch_limited": False}
    assert loader_limited(run(ran_out)) == (60, 75)
    by_plan = {**base, "epoch": 300, "epoch_seen": None, "epoch_limited": True}
    assert loader_limited(run(by_plan)) == (60, 300)  # (a sum of real and ideal: 120 < 300)
    roomy = {**base, "epoch": 300, "epoch_seen": None, "epoch_limited": False}
    assert loader_limited(run(roomy)) is None


def test_each_note_names_the_rule_that_said_it():
    # a program reads which rules spoke (d.noted), a person the sentences (d.notes)
    d = diagnose(_run("log", 20, ["loader exhausted"]), _run("replay", 10, ["converged"]))
    assert d.noted == ["adaptive", "adaptive"] and len(d.notes) == 2
    assert [n.rule for n in d.notes] == d.noted
    saved = json.loads(json.dumps(d.to_dict()))
    assert saved["notes"] == [str(n) for n in d.notes]  # saved as their sentences
