"""Issue 26, item 1: the interleaved pair is the evaluator's third mode
(``LoaderEvaluator(loader, mode="pair")``), and every live run — one side, the pair, a
followed run log — answers a dashboard the same way (``LiveRun``)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError
from loadeval_nb.core._shared import RunFollower
from loadeval_nb.core.measure import interleave
from loadeval_nb.core.measure.live import LiveRun


def _loader(n: int = 200) -> DataLoader:
    return DataLoader(TensorDataset(torch.arange(n, dtype=torch.float32)), batch_size=2)


def test_mode_pair_is_one_loop_of_both_sides_within_the_epoch(clock, tmp_path):
    dl = _loader()
    ev = LoaderEvaluator(
        dl, "pair", 5, str(tmp_path / "run.json"), sample_interval_s=None, clock=clock
    )
    # one public wrapper in every mode: the pass behind it is the interleaved engine
    assert type(ev) is LoaderEvaluator and ev.mode == "pair"
    assert isinstance(ev._engine, interleave.InterleavedPass)
    assert ev.sides == ("real", "ideal")
    served = 0
    for _ in ev:
        clock.advance(1_000_000)
        served += 1
    ev.close()
    assert served == len(ev) <= len(dl)  # the script's epoch stays the loader's
    metrics = ev.get_metrics()
    # DALI's keys at the top level, as in every mode (the real arm's), each arm's beside
    one = LoaderEvaluator(_loader(), sample_interval_s=None, clock=clock)
    for _ in one:
        clock.advance(1_000_000)
    one.close()
    assert set(one.get_metrics()) <= set(metrics)
    assert metrics["total_batches"] == metrics["real"]["total_batches"]
    assert metrics["batch_times"] == metrics["real"]["batch_times"]
    assert metrics["real"]["total_batches"] + metrics["ideal"]["total_batches"] == served
    # one name, two run logs beside it
    for side in ("real", "ideal"):
        doc = json.loads((tmp_path / f"run-{side}.json").read_text())
        assert doc["mode"] == ("log" if side == "real" else "replay")


@pytest.mark.parametrize("mode", ["log", "replay", "pair"])
def test_one_class_in_every_mode_and_the_loop_gets_the_engines_own_iterator(mode):
    data = list(range(100))
    ev = LoaderEvaluator(data, mode=mode, num_cached_batches=4, sample_interval_s=None)
    assert (
        type(ev) is LoaderEvaluator
        and ev.mode == mode
        and repr(ev).startswith("LoaderEvaluator(list, mode=")
    )
    it = iter(ev)
    # the wrapper hands the loop what the engine iterates with: nothing is added to a step
    assert type(it).__module__ != "loadeval_nb.core.measure.evaluator"
    assert len(list(it)) == len(ev)
    ev.close()
    ev.label = "renamed"  # an attribute set on the wrapper is the engine's
    assert ev.label == "renamed" and ev.__dict__.keys() == {"_engine"}


@pytest.mark.parametrize("arg", [{"blocks": 4}, {"contention": True}, {"variant": "num_workers=2"}])
def test_an_argument_of_the_pass_alone_names_mode_pair(arg):
    (name,) = arg
    with pytest.raises(LoadEvalError) as err:
        LoaderEvaluator(list(range(10)), **arg)
    assert str(err.value) == (
        f"{name}= is an argument of the interleaved pass; pass mode='pair' with it, or leave "
        "it out of mode='log'."
    )


def test_the_old_name_still_works_and_warns_once():
    """In a fresh interpreter: the first use warns, in one line naming the replacement and
    the version it goes in; the second does not; the class is the pair's engine."""
    import subprocess
    import sys

    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    import loadeval_nb.measure as m\n"
        "    a = m.InterleavedEvaluator\n"
        "    b = m.InterleavedEvaluator\n"
        "from loadeval_nb.core.measure.interleave import InterleavedPass\n"
        "print(len(w), a is b is InterleavedPass, w[0].category.__name__)\n"
        "print(w[0].message)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first, message = out.stdout.splitlines()
    assert first == "1 True FutureWarning"
    assert message == (
        "loadeval_nb.measure.InterleavedEvaluator is deprecated and goes in 0.3.0; use "
        "loadeval_nb.LoaderEvaluator(loader, mode='pair', ...)"
    )


def test_mode_pair_says_what_it_needs(clock):
    with pytest.raises(LoadEvalError, match=r"mode='pair' needs steps=N"):
        LoaderEvaluator(iter(range(10)), mode="pair")
    with pytest.raises(LoadEvalError, match="'log' or 'replay' or 'pair'"):
        LoaderEvaluator(_loader(), mode="pairs")
    with pytest.raises(LoadEvalError, match="metrics_file and metrics_files"):
        LoaderEvaluator(
            _loader(), mode="pair", metrics_file="a.json", metrics_files={"real": "b.json"}
        )


def test_every_live_run_answers_a_dashboard_the_same_way(clock, tmp_path):
    one = LoaderEvaluator(_loader(40), metrics_file=str(tmp_path / "one.json"), clock=clock)
    pair = LoaderEvaluator(_loader(), mode="pair", sample_interval_s=None, clock=clock)
    for ev in (one, pair):
        for _ in ev:
            clock.advance(1_000_000)
        ev.close()
    follower = RunFollower(str(tmp_path / "one.json"))
    for live in (one, pair, follower):
        assert isinstance(live, LiveRun)
        for side in live.sides:
            steps, cursor = live.steps_since(side, (0, 0))
            assert steps and all(s > 0 for s in steps)
            assert live.steps_since(side, cursor)[0] == []  # nothing new since
    assert follower.sides == ("real",)
    assert follower.steps_since("real")[0] == one.steps_since("real")[0]


def test_a_first_batch_check_is_given_at_construction(clock):
    seen = []
    ev = LoaderEvaluator(_loader(20), first_batch=seen.append, sample_interval_s=None, clock=clock)
    assert ev.config.first_batch is not None
    for _ in ev:
        pass
    for _ in ev:  # only the first epoch's first batch
        pass
    ev.close()
    assert len(seen) == 1 and torch.equal(seen[0][0], torch.tensor([0.0, 1.0]))


def test_two_loops_over_one_pair_at_once_are_refused_not_run_empty(clock):
    """``zip(ev, ev)`` made the first pass an empty loop, silently: the training ran 0
    steps. Now it says so; an iterator made and never used still changes nothing."""
    ev = LoaderEvaluator(_loader(), mode="pair", sample_interval_s=None, clock=clock)
    with pytest.raises(LoadEvalError, match=r"iterated twice at once \(zip\(ev, ev\)"):
        for _a, _b in zip(ev, ev):
            pass
    ev.close()
    again = LoaderEvaluator(_loader(), mode="pair", sample_interval_s=None, clock=clock)
    unused = iter(again)
    assert sum(1 for _ in again) == len(again) > 0
    del unused
    again.close()


def test_a_plan_is_not_hard_wired_to_two_arms():
    """Issue 26, item 1: a pass's plan names the arm of each block; a third arm (the
    contention arm to come) goes in turn with the others, every other round reversed."""
    from loadeval_nb.core.measure.blocks import BlockPlan

    two = BlockPlan(warmup=5, block=10, blocks=2, drain=3, settle=1)
    assert two.order() == ["real", "ideal", "ideal", "real"]
    three = BlockPlan(5, 10, 2, 3, 1, arms=("real", "ideal", "busy"))
    assert three.order() == ["real", "ideal", "busy", "busy", "ideal", "real"]
    # what each block leaves out: the warm-up first, a drain before a real block after
    # another arm's, a settle before another arm's, nothing where an arm goes on
    assert [skip for _, _, skip in three.block_steps()] == [5, 1, 1, 0, 1, 3]
    assert three.total_steps == 6 * 10 + 5 + 1 + 1 + 1 + 3
    assert three.cycle() == ["real", "ideal", "busy", "busy", "ideal", "real"]


def test_a_pair_is_planned_once(monkeypatch, clock):
    """run_pair asks whether the pass interleaves and hands the plan it made to the pass:
    one plan, one agreement over a process group (before: two)."""
    from loadeval_nb import RunSettings, run_pair
    from loadeval_nb.core.measure import blocks

    asked: list[str] = []

    def agree(what, mine):
        asked.append(what)
        return None  # no process group

    monkeypatch.setattr(blocks, "agree", agree)

    def loop(ev):
        for _ in ev:
            clock.advance(1_000_000)

    result = run_pair(_loader(), loop, RunSettings(steps=40, warmup=2, num_cached_batches=3,
                                                   sample_interval_s=None))  # fmt: skip
    assert result.diagnosis is not None, result.error
    assert asked == ["plan of the interleaved pass"]


@pytest.mark.parametrize("mode", ["log", "pair"])
def test_an_unknown_argument_is_one_sentence_naming_the_wrapper(mode):
    with pytest.raises(TypeError) as err:
        LoaderEvaluator(list(range(10)), mode=mode, stepz=4)
    assert str(err.value) == (
        f"LoaderEvaluator(mode={mode!r}) got an unexpected argument 'stepz' (did you mean "
        "'steps'?); see help(LoaderEvaluator) for its arguments."
    )


def test_a_refusal_names_only_keywords_the_api_raising_it_takes():
    # LoaderEvaluator(mode="pair") over a 32-batch loader said "(interleave=False)", a
    # keyword that class does not take (issue 47)
    import inspect
    import re

    from loadeval_nb.core.measure.blocks import NotInterleavable

    # (12 batches: too few for blocks, and for the loop's epochs after a warm-up of 10)
    loader = DataLoader(TensorDataset(torch.zeros(12, 2)), batch_size=1)
    with pytest.raises(NotInterleavable) as e:
        LoaderEvaluator(loader, mode="pair", sample_interval_s=None)
    said = str(e.value)
    takes = set(inspect.signature(LoaderEvaluator).parameters)
    suggested = set(re.findall(r"\b([a-z_]+)=", said))
    assert suggested and suggested <= takes, (suggested - takes, said)
    assert "mode='log'" in said and "mode='replay'" in said
    # and the way to the epoch pair, which run_pair takes for such a loader
    assert "on the loop's own epochs" in said and "run_pair(loader, train)" in said


def test_a_pair_over_a_short_loader_is_measured_on_the_loops_epochs(tmp_path):
    # LoaderEvaluator(mode="pair") over a 32-batch loader refused ("Cannot interleave");
    # it is the pair on the loop's own epochs now, as run_pair and the script runner
    # measure it: each iter() the next epoch, real and ideal in A B B A order
    from loadeval_nb import diagnose
    from loadeval_nb.core.measure.blocks import NotInterleavable

    loader = DataLoader(TensorDataset(torch.arange(32.0)), batch_size=1)
    ev = LoaderEvaluator(
        loader, mode="pair", warmup=2, sample_interval_s=None, metrics_file=str(tmp_path / "r.json")
    )
    assert type(ev) is LoaderEvaluator and ev.mode == "pair" and ev.sides == ("real", "ideal")
    assert len(ev) == 32 and ev.cache_ready and len(ev.cached_batches) == 20
    seen = []
    for _epoch in range(8):
        seen.append([float(b[0]) for b in ev])
    ev.close()
    # every epoch the loop's whole epoch: the real ones the loader's batches, in order
    assert [len(e) for e in seen] == [32] * 8
    for k in (0, 3, 4, 7):  # A B B A: epochs 1, 4, 5 and 8 are real
        assert seen[k] == [float(i) for i in range(32)]
    runs = ev.to_runs()
    assert len(runs["real"].blocks) == 4 and len(runs["ideal"].blocks) == 4
    assert runs["real"].settings["epoch_pair"] == {"epochs": 8, "order": "ABBA"}
    assert (tmp_path / "r-real.json").exists() and (tmp_path / "r-ideal.json").exists()
    assert set(ev.get_metrics()) >= {"real", "ideal"}
    d = diagnose(runs["real"], runs["ideal"])
    assert d.on_epochs and d.speedup is not None
    # an argument only blocks have is still refused for such a loader, in one sentence
    with pytest.raises(NotInterleavable):
        LoaderEvaluator(loader, mode="pair", blocks=4, sample_interval_s=None)
