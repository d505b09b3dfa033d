"""Arms as data: the engine hands each block to its arm, so a new arm is one small class
and a plan entry, and the straggler proof's pass is the same engine."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from loadeval_nb import LoaderEvaluator, LoadEvalError
from loadeval_nb.core.measure.arms import (
    KINDS,
    Arm,
    Block,
    Freed,
    PassState,
    Replay,
    Served,
    arms_for,
)
from loadeval_nb.core.measure.blocks import BlockPlan, PassPlan
from loadeval_nb.core.measure.timing import block_replay_iter

MS = 1_000_000


class Constant(Arm):
    """A made-up arm: the same batch, ``-1``, at every step (a plan entry and this class
    are all it takes)."""

    def steady(self, p, st: PassState, b: Block) -> Generator[int, None, bool]:
        yield from block_replay_iter([-1] * b.n, b.rec, p.clock)
        return False

    def step(self, p, st: PassState, b: Block, i: int) -> int:
        return -1


def _engine(arms, clock, loader=None, plan=None):
    plan = plan or BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=tuple(arms))
    return LoaderEvaluator(
        loader if loader is not None else list(range(100)),
        mode="pair",
        steps=plan.block * plan.blocks,
        warmup=plan.warmup,
        num_cached_batches=2,
        sample_interval_s=None,
        clock=clock,
        representative=False,
        planned=PassPlan(plan, None, 1),
        arms=arms,
    )


def test_a_new_arm_is_a_small_class_and_a_plan_entry(clock):
    arms = {
        "real": KINDS["real"]("real"),
        "ideal": Replay("ideal"),
        "constant": Constant("constant"),
    }
    ev = _engine(arms, clock)
    served = []
    for batch in ev:
        served.append(batch)
        clock.advance((1 if batch == -1 else 3 if batch < 2 else 10) * MS)
    plan = ev.plan
    assert plan.order() == ["real", "ideal", "constant", "constant", "ideal", "real"]
    assert len(served) == plan.total_steps
    by_arm = {name: n for name, n, _ in ev.spans()}
    assert set(by_arm) == {"real", "ideal", "constant"}
    # the made-up arm's blocks served its batch only, and its run is kept beside the others
    assert served.count(-1) == sum(n for name, n, _ in plan.block_steps() if name == "constant")
    run = ev.to_run("constant")
    assert run.n_steps == served.count(-1)
    assert run.steady_step_s() == pytest.approx([0.001] * len(run.steady_step_s()))
    assert set(ev.get_metrics()) >= {"real", "ideal", "constant"}
    spans = [(name, n, span / n / 1e6) for name, n, span in ev.spans()]
    assert [s[0] for s in spans] == plan.order()
    assert {name: ms for name, _, ms in spans} == {"real": 10.0, "ideal": 3.0, "constant": 1.0}
    ev.release()


def test_the_pass_and_its_plan_name_the_same_arms(clock):
    with pytest.raises(LoadEvalError, match="are not its plan's"):
        _engine(
            {"real": Served("real"), "ideal": Replay("ideal")},
            clock,
            plan=BlockPlan(
                warmup=3, block=4, blocks=2, drain=1, settle=1, arms=("real", "ideal", "free")
            ),
        )
    with pytest.raises(LoadEvalError, match="No arm is called 'free'"):
        arms_for(("real", "free"))


def test_the_straggler_proof_is_served_by_the_same_engine(clock):
    from loadeval_nb.core.explore.straggler import ARMS, StragglerPass, proof_arms

    arms = proof_arms(ARMS, "free")
    assert [type(a) for a in arms.values()] == [Served, Freed, Served]
    plan = BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=ARMS)
    sp = StragglerPass(list(range(100)), plan, replay_in="free", num_cached_batches=2, clock=clock)
    it = iter(sp)
    assert sp._engine.mode == "pair"  # (the pass is the interleaved engine's)
    for _ in it:
        clock.advance(2 * MS)
    assert [b.arm for b in sp.blocks] == plan.order()
    sp.release()


@pytest.mark.parametrize("replay_in", ["free", None])
def test_a_loop_that_stops_at_len_keeps_the_proof_s_last_block(clock, replay_in):
    """A loop that stops once it has len() batches (Lightning, a break at the last step)
    leaves the pass open: run_pass ends it before reading the blocks, so the last one
    counts (a block lost is a pair lost to the proof's interval)."""
    from loadeval_nb.core.explore.straggler import ARMS, run_pass

    plan = BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=ARMS)

    def run_once(batches):
        for i, _ in enumerate(batches):
            clock.advance(2 * MS)
            if i == len(batches) - 1:
                break

    blocks = run_pass(
        list(range(100)), run_once, plan, replay_in=replay_in, num_cached_batches=2, clock=clock
    )
    assert [b.arm for b in blocks] == plan.order()
    assert blocks[-1].steps == 4 and blocks[-1].step_s == pytest.approx(0.002)


class _Stream:
    """A loader with no len() (an IterableDataset's): counts the batches drawn."""

    def __init__(self, n):
        self.n, self.drawn = n, 0

    def __iter__(self):
        for i in range(self.n):
            self.drawn += 1
            yield i


def test_the_proof_s_freed_rank_draws_nothing_in_its_arm(clock):
    """On a loader whose len() does not bound its epoch a pair's replayed steps are paid
    for ahead; the proof's replaying rank's loader is taken out of the job in its arm:
    it draws only the batches its real blocks serve."""
    from loadeval_nb.core.explore.straggler import ARMS, StragglerPass

    plan = BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=ARMS)
    stream = _Stream(1000)
    sp = StragglerPass(stream, plan, replay_in="free", num_cached_batches=2, clock=clock)
    n = sum(1 for _ in sp)
    served_free = sum(steps for arm, steps, _ in plan.block_steps() if arm == "free")
    assert n == plan.total_steps and stream.drawn <= n - served_free + 1
    sp.release()


def test_a_block_in_which_the_loader_ran_out_is_not_whole(clock):
    from loadeval_nb.core.explore.straggler import ARMS, StragglerPass

    plan = BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=ARMS)
    sp = StragglerPass(list(range(11)), plan, replay_in=None, num_cached_batches=2, clock=clock)
    assert sum(1 for _ in sp) == 11  # real (7), free (1 + 4): the 12th batch never came
    assert [b.arm for b in sp.blocks] == ["real"]
    sp.release()
