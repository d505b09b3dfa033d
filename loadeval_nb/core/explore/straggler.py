"""The straggler proof's pass on one rank: the user's loop run once over blocks of three
arms in A B C C B A order: ``real`` (every rank serves its loader's batches), ``free``
(the suspected rank alone serves its cached batches: its loader taken out of the job)
and ``control`` (the runner-up alone does).

Every rank runs the same plan (a :class:`~..measure.blocks.BlockPlan` with the arms
:data:`ARMS`, agreed by :func:`loadeval_nb.ranks.prove_straggler` before the pass), so
every rank hands its loop the same number of batches and DDP's all-reduce meets every
step; a rank replays in one arm at most, and serves its real loader in the others. The
fleet's step in a ``free`` block is the step the job would take if the suspect's loader
cost nothing; in a ``control`` block, if the runner-up's did. Among ranks that load
alike, freeing any one of them shortens the step a little (the step waits for whichever
rank's batch is late): the control arm is what tells that from a straggler.

As in the interleaved pair: the pass begins with ``warmup`` real steps (a replaying
rank's cache filled from them, copied as the replay cache copies); the steps a block
leaves out at its start (``drain`` at a real block after another arm's: the queue a
replaying rank's workers filled meanwhile; ``settle`` at the start of another arm's
block) are served but not measured.
The blocks are served by the interleaved pair's engine (the one behind
``LoaderEvaluator(mode="pair")``, :class:`~..measure.interleave.InterleavedPass`), given the proof's arms
(:func:`proof_arms`: a :class:`~..measure.arms.Freed` of the replaying rank's arm, a
:class:`~..measure.arms.Served` loader in every other): each block is timed as one span,
from its first measured step to the loop's next ``next()``, with CUDA's work that lands
after a block's end charged to it by the engine's events (no step is synchronised).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from ..errors import LoadEvalError
from ..measure.arms import Arm, Freed, Served
from ..measure.blocks import MAX_BLOCKS, MIN_BLOCK, MIN_BLOCKS, BlockPlan, PassPlan, plan_blocks
from ..measure.interleave import InterleavedPass
from ..measure.timing import DEFAULT_CLOCK, Clock

FREE = "free"
"""The arm in which the suspect serves its cached batches (every other rank its loader)."""
CONTROL = "control"
"""The arm in which the runner-up serves its cached batches (every other rank its loader)."""
ARMS = ("real", FREE, CONTROL)


def plan_proof(
    steps: int,
    warmup: int,
    num_cached_batches: int,
    depth: int,
    loader_len: Optional[int],
    arms: tuple[str, ...] = ARMS,
) -> BlockPlan:
    """The proof's plan: the interleaved pair's (:func:`~..measure.blocks.plan_blocks`,
    ``steps`` per arm, the whole pass within an epoch of ``loader_len``), except that
    every change of arm leaves out ``drain`` steps: at the start of every arm some rank
    goes back to its real loader after replaying (its workers' queue full). Raises
    :class:`LoadEvalError` when the steps or the epoch are too few for blocks."""
    for n in range(MAX_BLOCKS, MIN_BLOCKS - 1, -2):
        plan = plan_blocks(steps, warmup, num_cached_batches, depth, loader_len, n, arms)
        if plan is None:
            continue
        plan = replace(plan, settle=plan.drain)
        while loader_len is not None and plan.total_steps > loader_len and plan.block > MIN_BLOCK:
            plan = replace(plan, block=plan.block - 1)
        if loader_len is None or plan.total_steps <= loader_len:
            return plan
    first, drain = max(warmup, num_cached_batches, 1), 2 * depth + 1
    need = BlockPlan(first, MIN_BLOCK, MIN_BLOCKS, drain, drain, arms).total_steps
    have = (
        f"an epoch of the loader has {loader_len} batches"
        if loader_len is not None and loader_len < need
        else f"{steps} steps an arm are too few"
    )
    raise LoadEvalError(
        f"Cannot prove a straggler: {have}, and {MIN_BLOCKS} blocks of {MIN_BLOCK} steps in "
        f"each of its {len(arms)} arms need {need}; pass more steps (RunSettings(steps=...)) "
        "or a loader with a longer epoch."
    )


@dataclass(frozen=True)
class BlockSpan:
    """One measured block of the pass on one rank: its arm, its measured steps and their
    span (ns)."""

    arm: str
    steps: int
    span_ns: int

    @property
    def step_s(self) -> float:
        """The block's mean step (seconds)."""
        return self.span_ns / self.steps / 1e9


class StragglerPass:
    """The loader the loop gets for the proof's pass (``mode = "straggler"``): it serves
    ``plan``'s blocks, cached batches in the blocks of arm ``replay_in`` (``free`` on the
    suspect, ``control`` on the runner-up, None elsewhere), its loader's batches
    otherwise, and ends after ``plan.total_steps`` steps. The blocks are served by the
    interleaved pass's engine (:class:`~..measure.interleave.InterleavedPass`),
    given the proof's arms (:func:`proof_arms`) and no run log. Other attributes
    (``dataset``, ``sampler``, ``batch_size``, ...) are the loader's."""

    mode = "straggler"

    def __init__(
        self,
        loader: Any,
        plan: BlockPlan,
        *,
        replay_in: Optional[str],
        num_cached_batches: int,
        cache_on: str = "host",
        clock: Optional[Clock] = None,
    ) -> None:
        self.dataloader = loader
        self.plan = plan
        self.replay_in = replay_in
        self.num_cached_batches = num_cached_batches
        self.cache_on = cache_on
        self.clock: Clock = clock or DEFAULT_CLOCK
        self._engine: Optional[InterleavedPass] = None

    def __len__(self) -> int:
        return self.plan.total_steps

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "dataloader" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["dataloader"], name)

    def __iter__(self) -> Iterator[Any]:
        if self._engine is not None:
            raise LoadEvalError(
                "The straggler proof's loader was iterated twice: its pass is one loop over "
                "it; run one epoch of the training loop in run_once."
            )
        plan = self.plan
        self._engine = InterleavedPass(
            self.dataloader,
            steps=plan.block * plan.blocks,
            warmup=plan.warmup,
            num_cached_batches=self.num_cached_batches,
            cache_on=self.cache_on,
            sample_interval_s=None,
            clock=self.clock,
            representative=False,
            planned=PassPlan(plan, None, 1),
            arms=proof_arms(plan.arms, self.replay_in),
        )
        return iter(self._engine)

    @property
    def blocks(self) -> list[BlockSpan]:
        """The blocks measured so far, in the pass's order."""
        if self._engine is None:
            return []
        return [BlockSpan(*span) for span in self._engine.spans()]

    def end(self) -> None:
        """End the pass where the loop let go of it (a loop that stops once it has
        ``len()`` batches leaves it open): its last block ends now."""
        if self._engine is not None:
            self._engine.close()

    def release(self) -> None:
        """Stop the workers the pass started and let go of the cached batches."""
        if self._engine is not None:
            self._engine.release()


def proof_arms(names: tuple[str, ...], replay_in: Optional[str]) -> dict[str, Arm]:
    """The proof's arms on one rank: its cached batches in the arm ``replay_in``, its
    loader's in the others, their first steps the plan's (``drain`` and ``settle``)."""
    return {n: Freed(n) if n == replay_in else Served(n) for n in names}


def run_pass(
    loader: Any,
    run_once: Callable[[Any], None],
    plan: BlockPlan,
    *,
    replay_in: Optional[str],
    num_cached_batches: int,
    cache_on: str = "host",
    clock: Optional[Clock] = None,
) -> list[BlockSpan]:
    """Run ``run_once`` once over a :class:`StragglerPass` and return its measured blocks
    (the cache let go of, whatever happens). Raises what ``run_once`` raises."""
    wrapper = StragglerPass(
        loader,
        plan,
        replay_in=replay_in,
        num_cached_batches=num_cached_batches,
        cache_on=cache_on,
        clock=clock,
    )
    try:
        run_once(wrapper)
        # a loop that stopped once it had len() batches left its pass open: ended now,
        # the last block ends where the loop let go (before the blocks are read)
        wrapper.end()
        return list(wrapper.blocks)
    finally:
        wrapper.release()
