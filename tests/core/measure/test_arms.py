"""Arms as data: the engine hands each block to its arm, so a new arm is one small class
and a plan entry, and the straggler proof's pass is the same engine."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from loadeval_nb import LoadEvalError
from loadeval_nb.core.measure.arms import KINDS, Arm, Block, PassState, Replay, Served, arms_for
from loadeval_nb.core.measure.blocks import BlockPlan
from loadeval_nb.core.measure.interleave import InterleavedEvaluator
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
    return InterleavedEvaluator(
        loader if loader is not None else list(range(100)),
        steps=plan.block * plan.blocks,
        warmup=plan.warmup,
        num_cached_batches=2,
        sample_interval_s=None,
        clock=clock,
        representative=False,
        planned=(plan, None, 1),
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
    assert [type(a) for a in arms.values()] == [Served, Replay, Served]
    plan = BlockPlan(warmup=3, block=4, blocks=2, drain=1, settle=1, arms=ARMS)
    sp = StragglerPass(list(range(100)), plan, replay_in="free", num_cached_batches=2, clock=clock)
    it = iter(sp)
    assert isinstance(sp._engine, InterleavedEvaluator)  # (the pass is the engine's)
    for _ in it:
        clock.advance(2 * MS)
    assert [b.arm for b in sp.blocks] == plan.order()
    sp.release()
