"""The variant arm: the loader rebuilt with other settings, served in the same pass as the
real one; its gain against a stopwatch of the two loaders interleaved (sleeping workloads,
whose gain is known by construction), its place in the plan, its workers stopped, the
loop's epoch kept, and one sentence for what it cannot take."""

from __future__ import annotations

import time

import psutil
import pytest
import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator, RunSettings, run_pair
from loadeval_nb.core.measure import Variant
from loadeval_nb.core.measure.blocks import plan_blocks
from loadeval_nb.core.record.lognames import log_name, parse_log_name
from loadeval_nb.errors import LoadEvalError, OptionError

from ...timing import Disturbed, retry_once
from ...workloads import SleepyItems, sleep_steps

BATCH, ITEM_S, STEP_S = 8, 0.003, 0.002
"""A batch takes 24 ms to make (asleep: no core), a step 2 ms: one worker makes the loop
wait 22 ms a step, four make a batch every 6 ms, so the steps are about 3.5 to 4 times as
fast with four, by construction."""


def _loader(workers: int, n: int = 4000) -> DataLoader:
    return DataLoader(SleepyItems(n, ITEM_S), batch_size=BATCH, num_workers=workers)


# ---- what a variant is ---------------------------------------------------------------------


def test_a_variant_is_read_as_a_user_writes_it():
    v = Variant.of("num_workers=4, pin_memory=True")
    assert v.settings == {"num_workers": 4, "pin_memory": True}
    assert v.words == "num_workers=4, pin_memory=True"
    assert Variant.of({"prefetch_factor": 4}).settings == {"prefetch_factor": 4}
    assert RunSettings(variants="num_workers=2").variant == Variant.of({"num_workers": 2})
    assert RunSettings(variants=["advice"]).variants == ("advice",)
    assert RunSettings(variants="advice").variant is None  # decided by a first pass


@pytest.mark.parametrize(
    "spec, match",
    [
        ("batch_size=64", "'batch_size' cannot be tried; a variant changes num_workers"),
        ("num_workers", "is not a setting; write NAME=VALUE"),
        ("num_workers=four", "neither a whole number nor True/False"),
        ("pin_memory=2", "pin_memory is True or False"),
        ("num_workers=2, num_workers=4", "sets num_workers twice"),
        (" , ", "names no setting to try"),
        (3, "takes settings to try"),
    ],
)
def test_a_bad_variant_is_one_sentence_naming_the_option(spec, match):
    with pytest.raises(OptionError, match=match) as e:
        RunSettings(variants=spec)
    assert e.value.option == "variants" and "\n" not in str(e.value)
    assert e.value.renamed("--try").startswith("--try")


def test_one_variant_a_pass_and_only_in_an_interleaved_pass():
    with pytest.raises(OptionError, match="holds 2 variants; one a pass"):
        RunSettings(variants=["num_workers=2", "num_workers=4"])
    with pytest.raises(OptionError, match="a variant is measured only in an interleaved pass"):
        RunSettings(variants="num_workers=2", interleave=False)


def test_a_loader_that_cannot_be_rebuilt_is_one_sentence():
    with pytest.raises(LoadEvalError, match="Only a torch.utils.data.DataLoader can be rebuilt"):
        LoaderEvaluator([torch.zeros(2)] * 400, mode="pair", steps=100, variant="num_workers=2")


def test_its_runs_are_named_by_the_one_grammar():
    name = log_name("20260101-120000", "train", "variant", rank=1)
    parsed = parse_log_name(name)
    assert parsed is not None and parsed.side == "variant" and parsed.rank == 1


# ---- its place in the plan -------------------------------------------------------------------


def test_the_variant_comes_after_the_ideal_and_leaves_out_its_own_queue():
    plan = plan_blocks(200, 10, 8, depth=2, loader_len=None, arms=("real", "ideal", "variant"),
                       variant_depth=8)  # fmt: skip
    assert plan is not None
    assert plan.order()[:6] == ["real", "ideal", "variant", "variant", "ideal", "real"]
    steps = plan.block_steps()
    # into the variant: its own loader's queue (8 deep: 17 steps); back to real: the drain
    assert steps[2][2] == 17 and steps[3][2] == 0 and steps[5][2] == plan.drain
    # within the loader's epoch, every arm's steps and the left-out ones
    tight = plan_blocks(200, 10, 8, depth=2, loader_len=500, arms=("real", "ideal", "variant"),
                        variant_depth=8)  # fmt: skip
    assert tight is not None and tight.total_steps <= 500


# ---- in a pass: the epoch kept, its workers stopped, its gain against a stopwatch -----------


@pytest.mark.slow
def test_the_loop_gets_no_more_batches_than_its_epoch_and_the_variants_workers_stop():
    loader = _loader(1, n=1200)  # 150 batches an epoch
    me = psutil.Process()
    before = set(me.children())  # (another test's processes are not this pass's)
    ev = LoaderEvaluator(loader, mode="pair", steps=120, warmup=4, num_cached_batches=4,
                              variant="num_workers=2", contention=False)  # fmt: skip
    seen = sum(1 for _ in ev)
    ev.close()
    assert seen == len(ev) <= len(loader)
    runs = ev.to_runs()
    assert set(runs) == {"real", "ideal", "variant"}
    assert runs["variant"].loader_settings["num_workers"] == 2
    assert runs["real"].loader_settings["num_workers"] == 1
    assert runs["variant"].settings["variant"] == {"num_workers": 2}
    assert len(runs["variant"].blocks) == len(runs["real"].blocks)
    deadline = time.monotonic() + 5
    while set(me.children()) - before and time.monotonic() < deadline:  # (they exit as told)
        time.sleep(0.05)
    assert set(me.children()) - before == set()
    assert loader.num_workers == 1  # the user's loader as it was


def _stopwatch(rounds: int = 3, steps: int = 40, skip: int = 8) -> float:
    """The two loaders' steps, timed by hand and interleaved (one, four, four, one, ...):
    the mean step with one worker over the mean step with four."""
    loaders = {1: _loader(1), 4: _loader(4)}
    its = {w: iter(dl) for w, dl in loaders.items()}
    times: dict[int, list[float]] = {1: [], 4: []}
    for r in range(rounds):
        for w in (1, 4) if r % 2 == 0 else (4, 1):
            it = its[w]
            for _ in range(skip):  # the queue filled while the other loader ran
                next(it)
                time.sleep(STEP_S)
            t = time.perf_counter()
            for _ in range(steps):
                next(it)
                time.sleep(STEP_S)
            times[w].append((time.perf_counter() - t) / steps)
    for it in its.values():
        it._shutdown_workers()  # type: ignore[attr-defined]
    return sum(times[1]) / sum(times[4])


@pytest.mark.slow
@retry_once
def test_the_gain_of_four_workers_is_measured_within_ten_percent_of_a_stopwatch():
    before = _stopwatch()
    result = run_pair(
        _loader(1),
        sleep_steps(STEP_S),
        RunSettings(
            steps=200, warmup=8, num_cached_batches=8, contention=False, variants="num_workers=4"
        ),  # fmt: skip
    )
    after = _stopwatch()
    d = result.diagnosis
    assert d is not None and d.tried is not None, result.error
    if d.disturbed:
        raise Disturbed(f"the tool marked the {' and '.join(d.disturbed)} runs disturbed")
    truth = (before + after) / 2
    assert 3.0 < truth < 4.5, truth  # the workload as built
    assert d.tried.settings == {"num_workers": 4}
    assert abs(d.tried.speedup / truth - 1) < 0.10, (d.tried.speedup, before, after)
    lo, hi = d.tried.speedup_ci
    assert lo is not None and hi is not None and lo > 1.0 and d.tried.outcome == "faster"
    facts = {f.key: f.text for f in d.facts().facts}
    assert "measured in this pass" in facts["tried"]
    # the advice begins with what the pass measured
    assert facts["advice"].startswith("Set num_workers=4")


@pytest.mark.slow
@retry_once
def test_try_advice_measures_what_the_first_pass_advised():
    result = run_pair(
        _loader(1),
        sleep_steps(STEP_S),
        RunSettings(
            steps=200, warmup=8, num_cached_batches=8, contention=False, variants="advice"
        ),  # fmt: skip
    )
    d = result.diagnosis
    assert d is not None, result.error
    if d.disturbed:
        raise Disturbed(f"the tool marked the {' and '.join(d.disturbed)} runs disturbed")
    # one worker waiting on sleeps: the simulator advises more, and the second pass
    # measures that many
    assert d.tried is not None and d.tried.advised, d.notes
    assert d.tried.settings["num_workers"] > 1 and d.tried.outcome == "faster"


def test_a_loader_too_short_for_the_variants_blocks_says_so_and_measures_the_pair():
    """An epoch with room for the pair's blocks but not the variant's: the sentence counts
    the variant arm's blocks, the pair runs its sides one after the other, and the verdict
    says the variant was not measured."""
    from loadeval_nb.core.measure.blocks import NotInterleavable, plan_pass

    loader = DataLoader(torch.arange(120.0), batch_size=2, num_workers=0)  # 60 batches
    variant = DataLoader(torch.arange(120.0), batch_size=2, num_workers=2)
    with pytest.raises(NotInterleavable, match="interleaved blocks with the variant arm need"):
        plan_pass(loader, steps=30, warmup=2, num_cached_batches=3, variant=variant)
    result = run_pair(loader, lambda ev: [None for _ in ev],
                      RunSettings(steps=30, warmup=2, num_cached_batches=3,
                                  sample_interval_s=None, variants="num_workers=2"))  # fmt: skip
    assert result.diagnosis is not None and result.diagnosis.tried is None, result.error
    assert result.variant is None
    assert any("the variant (num_workers=2) was not measured" in n for n in result.diagnosis.notes)


def test_the_variants_loader_is_built_once_a_pair(monkeypatch):
    """The plan needs the variant's loader (its queue's depth) and so does the pass (its
    batches): one rebuild serves both, as the plan hands it to the pass."""
    from loadeval_nb.core.measure import variant as variant_module

    built = []
    rebuild = variant_module.rebuild_loader
    monkeypatch.setattr(
        variant_module, "rebuild_loader", lambda *a, **k: built.append(1) or rebuild(*a, **k)
    )
    loader = DataLoader(torch.arange(800.0), batch_size=2, num_workers=0)
    result = run_pair(loader, lambda ev: [None for _ in ev],
                      RunSettings(steps=60, warmup=2, num_cached_batches=3,
                                  sample_interval_s=None, variants="num_workers=1"))  # fmt: skip
    assert result.ok and result.variant is not None, result.error
    assert len(built) == 1


def test_the_plan_says_when_the_epoch_set_its_blocks():
    """A variant arm takes a side's steps from the epoch: where the loader's epoch, not
    the steps asked, set the blocks' length, the plan says so, its run logs keep it, and
    the verdict reads it (not a sum of its own that knows only real and ideal)."""
    arms = ("real", "ideal", "variant")
    assert plan_blocks(200, 10, 10, 0, 10_000, arms=arms).epoch_limited is False
    assert plan_blocks(200, 10, 10, 0, None, arms=arms).epoch_limited is False
    short = plan_blocks(200, 10, 10, 0, 420, arms=arms)
    assert short is not None and short.epoch_limited
    # 420 batches would hold the pair's 200 a side (10 + 2 x 190 + drains), not the variant's
    assert plan_blocks(200, 10, 10, 0, 420).epoch_limited is False
    loader = DataLoader(torch.arange(420, dtype=torch.float32), batch_size=1)
    ev = LoaderEvaluator(
        loader, mode="pair", steps=200, warmup=10, num_cached_batches=10, variant="pin_memory=True",
        sample_interval_s=None,
    )  # fmt: skip
    assert ev.plan.epoch_limited
    for _ in ev:
        pass
    ev.close()
    assert ev.to_run("real").settings["interleaved"]["epoch_limited"] is True


# ---- what a pass started, it stops; what the user owns, it leaves as it was ------------------


def _new_children(me: psutil.Process, before: set, wait_s: float = 5.0) -> set:
    """This process's children the pass left, after giving exiting workers a moment."""
    deadline = time.monotonic() + wait_s
    while {p for p in me.children() if p.is_running()} - before and time.monotonic() < deadline:
        time.sleep(0.05)
    return {p for p in me.children() if p.is_running()} - before


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.parametrize("how", ["ends", "break", "zip"])
def test_the_variants_workers_go_with_the_pass(persistent, how):
    # persistent or not: after the pass, after a loop that breaks out of it, and after a
    # zip of two evaluators that leaves one behind (before: 2 worker processes stayed for as
    # long as the evaluator existed; 4 after a break with persistent workers)
    import gc

    me = psutil.Process()
    before = set(me.children())
    loader = DataLoader(torch.arange(2400.0), batch_size=4)
    variant = "num_workers=2" + (", persistent_workers=True" if persistent else "")

    def make() -> LoaderEvaluator:
        return LoaderEvaluator(loader, mode="pair", steps=120, warmup=4, variant=variant,
                               contention=False, sample_interval_s=None)  # fmt: skip

    ev = make()
    if how == "ends":
        for _ in ev:
            pass
    elif how == "break":
        for i, _ in enumerate(ev):
            if i == 150:
                break
    else:
        other = make()
        for _ in zip(range(150), ev, other):
            pass
        del other
    gc.collect()
    assert _new_children(me, before) == set()
    assert loader.num_workers == 0  # the user's loader as it was
    ev.close()


@pytest.mark.parametrize("own_generator", [True, False])
def test_the_users_next_epoch_shuffles_as_without_a_variant(own_generator):
    # the variant draws from copies of the user's sampler and generator (or of torch's
    # global one): the loop's next epoch after a pass with a variant is the one after the
    # same pass without it (before: it shuffled differently)
    class Counting(torch.utils.data.RandomSampler):  # a stateful sampler of the user's
        def __iter__(self):
            self.passes = getattr(self, "passes", 0) + 1
            return super().__iter__()

    def next_epoch(variant):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1) if own_generator else None
        data = torch.arange(2400.0)
        sampler = Counting(data, generator=g)
        loader = DataLoader(data, batch_size=4, sampler=sampler, generator=g)
        ev = LoaderEvaluator(loader, mode="pair", steps=120, warmup=4, variant=variant,
                             contention=False, sample_interval_s=None)  # fmt: skip
        for _ in ev:
            pass
        ev.close()
        return [b.tolist() for b in loader][:10], sampler.passes

    with_variant, passes = next_epoch("num_workers=1")
    without, passes_without = next_epoch(None)
    assert with_variant == without
    assert passes == passes_without == 2  # the measured epoch's pass and the next one
