"""The plan of an interleaved pass, and the one rule for whether a pass interleaves.

A pass begins with ``warmup`` real steps (the replay cache filled from them), then
``blocks`` blocks of ``block`` steady steps per side in A B B A order; ``drain`` steps
are left out at the start of each real block that follows an ideal one (the queue the
workers filled meanwhile), ``settle`` at the start of an ideal block that follows a real
one. :func:`plan_pass` makes the plan once, before the pass's first step, from the
settings, the loader's ``len()`` and queue depth and (under ``torch.distributed``) every
rank's; the front ends (``explore/pair.py``, the script runner) ask the same function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Optional

from .._env import agree, loader_settings, safe_len
from ..errors import LoadEvalError
from ..record.run import CONTENDED, SIDES
from .adaptive import AutoStop
from .variant import VARIANT

ARMS_WITH_CONTENTION = ("real", CONTENDED, "ideal")
"""The arms of a pass with the contended arm, in the order of a round (R C I I C R): a
real block only ever follows a contended one, whose loader never stopped, so it needs no
drain of a queue filled while the loader sat idle, and the changes of arm leave out no
more steps than a pair's R I I R."""
CHEAP = 0.25
"""The contended arm is on by default (``contention=None``) where it is cheap: the loader
has workers (on every rank), and the arm's blocks add at most this share to the pass's
steps, within the loader's epoch, without shortening the pair's own blocks."""

MIN_BLOCK = 8
"""Fewest steady steps in a block: fewer and a block's mean is mostly noise."""
MAX_BLOCKS = 8
"""Blocks per side when the steps allow (8 ratios: a t-interval with 7 degrees of freedom)."""
MIN_BLOCKS = 2
"""Fewest blocks per side (one A B B A cycle)."""
WAITED_NS = 500_000
"""A real step whose batch took longer than this (or 5 % of an ideal step) to come
waited for the loader: the queue filled during the ideal block is used up."""


@dataclass(frozen=True)
class BlockPlan:
    """How one pass interleaves: ``warmup`` real steps first (the cache filled from them),
    then ``blocks`` blocks of ``block`` steady steps per arm, the arms in turn and every
    other round reversed (A B B A, or A B C C B A with three arms: a drift linear in time
    lands on every arm alike); ``drain`` steps left out at the start of a real block that
    follows another arm's, ``settle`` at the start of another arm's block."""

    warmup: int
    block: int
    blocks: int
    drain: int
    settle: int = 0
    """Steps left out at the start of a block of an arm other than real that follows
    another arm's (the workers finishing the batches they had in hand); 0: ``drain``."""
    arms: tuple[str, ...] = SIDES
    """The arms the pass serves, the real one first (a pair: real and ideal)."""
    contended_block: int = 0
    """Steady steps in a block of the contended arm (0: ``block``): half the pair's
    blocks, so that the split costs a quarter of the pass, not half of it."""
    no_contention: Optional[str] = field(default=None, compare=False)
    """Why the pass has no contended arm where it was asked for or would be on by default
    (a note for the verdict); None otherwise."""
    variant_drain: int = 0
    """Steps left out at the start of a block of the variant arm (its rebuilt loader's
    queue, filled while other arms ran, and the steps its workers got ahead by)."""
    epoch_limited: bool = field(default=False, compare=False)
    """The loader's epoch, not the steps asked, set the blocks' length: the pass measured
    fewer steps a side than were asked, and more steps would not change that (the run
    logs keep it, the verdict's advice reads it)."""

    def order(self) -> list[str]:
        """The arm of each block: real, ideal, ideal, real, real, ideal, ..."""
        out = []
        for b in range(self.blocks):
            out += list(self.arms if b % 2 == 0 else self.arms[::-1])
        return out

    def cycle(self) -> list[str]:
        """One more round trip of the arms (the adaptive stop's next cycle)."""
        return list(self.arms + self.arms[::-1])

    def block_steps(
        self, sides: Optional[list[str]] = None, before: Optional[str] = None
    ) -> list[tuple[str, int, int]]:
        """(side, steps served, steps left out at its start) for each block of the pass, or
        of ``sides`` after a block of side ``before`` (the adaptive stop's next cycle)."""
        out = []
        first = sides is None
        for k, side in enumerate(self.order() if sides is None else sides):
            skip = self.warmup if first and k == 0 else self.left_out(side, before)
            steps = (
                self.contended_block if side == CONTENDED and self.contended_block else self.block
            )
            out.append((side, steps + skip, skip))
            before = side
        return out

    def left_out(self, side: str, before: Optional[str]) -> int:
        """Steps left out at the start of a block of ``side`` after one of ``before``: none
        where an arm goes on; between real and contended (the loader producing in both)
        one as the drawing thread starts, and the queue's depth (``settle``) into a real
        block, in case the drawing thread got ahead; ``drain`` into a real block after
        any other arm, ``settle`` into any other."""
        if side == before:
            return 0
        settle = self.settle or self.drain
        if {side, before} == {"real", CONTENDED}:
            return settle if side == "real" else 1
        if side == VARIANT:  # its own loader, whose queue filled while it sat idle
            return self.variant_drain or self.drain
        return self.drain if side == "real" else settle

    def most_left_out(self, steps: int, per_block: int) -> int:
        """The most steps an arm of ``steps`` (an adaptive pass's most) leaves out at
        ``per_block`` a block: its blocks are at least :data:`MIN_BLOCK` steps."""
        return per_block * steps // MIN_BLOCK

    @property
    def total_steps(self) -> int:
        """Every step the pass serves, every arm's, warm-up and drains included."""
        return sum(n for _, n, _ in self.block_steps())


def queue_depth(loader: Any) -> int:
    """Batches a DataLoader has asked its workers for ahead of the loop
    (``prefetch_factor × num_workers``); 0 for a loader without workers."""
    info = loader_settings(loader)
    workers = info.get("num_workers")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers <= 0:
        return 0
    factor = info.get("prefetch_factor")
    return workers * (factor if isinstance(factor, int) and factor > 0 else 2)


def plan_blocks(
    steps: int,
    warmup: int,
    num_cached_batches: int,
    depth: int,
    loader_len: Optional[int] = None,
    blocks: Optional[int] = None,
    arms: tuple[str, ...] = SIDES,
    variant_depth: int = 0,
) -> Optional[BlockPlan]:
    """The plan for ``steps`` steps per side (warm-up included, as for a real run), with
    ``depth`` batches prefetched. With ``loader_len`` (the loader's ``len()``), the whole
    pass — both sides' blocks, the warm-up and the drained steps — fits in one epoch of the
    loader: the loop is handed no more batches than it would be without the tool, so a
    schedule sized from ``len(loader)`` runs as it would. None when the steps (or the
    epoch) are too few to interleave. With the contended arm among ``arms``: the pair's
    plan with the arm added (:func:`add_contention`; the pair's blocks shortened to fit the
    epoch if need be), or without it and saying why."""
    if CONTENDED in arms:
        rest = tuple(a for a in arms if a != CONTENDED)
        pair = plan_blocks(
            steps, warmup, num_cached_batches, depth, loader_len, blocks, rest, variant_depth
        )
        return None if pair is None else add_contention(pair, loader_len, cheap_only=False)
    first = max(warmup, num_cached_batches, 1)
    drain, settle = 2 * depth + 1, max(depth, 1)
    vdrain = 2 * variant_depth + 1 if VARIANT in arms else 0
    steady = steps - warmup
    for n in [blocks] if blocks else range(MAX_BLOCKS, MIN_BLOCKS - 1, -2):
        # a side's steps hold its drained ones too (every other real block follows an
        # ideal one): the pass takes no longer than a real run and an ideal run would
        drains = (n // 2) * drain
        block = by_steps = (steady - drains) // n
        if loader_len is not None:  # the pass, every step of it, within the epoch
            fixed = BlockPlan(first, 0, n, drain, settle, arms, variant_drain=vdrain).total_steps
            block = min(block, (loader_len - fixed) // (len(arms) * n))
        if block >= MIN_BLOCK:
            return BlockPlan(
                first, block, n, drain, settle, arms, variant_drain=vdrain,
                epoch_limited=block < by_steps,
            )  # fmt: skip
    return None


def add_contention(pair: BlockPlan, loader_len: Optional[int], cheap_only: bool) -> BlockPlan:
    """``pair`` (a plan of real and ideal) with the contended arm added: its blocks half
    as long as the pair's (:data:`MIN_BLOCK` at least), a round R C I I C R. The whole
    pass stays within ``loader_len``: asked for (``cheap_only`` False), the pair's blocks
    are shortened to make room if need be; on by default (True), the arm is added only
    where it is cheap (:data:`CHEAP`). Where it cannot be added: ``pair``, with the
    reason in its ``no_contention``."""
    extra = 0
    for block in range(pair.block, MIN_BLOCK - 1, -1):
        arms = (*ARMS_WITH_CONTENTION, *(a for a in pair.arms if a not in SIDES))
        plan = replace(
            pair,
            block=block,
            arms=arms,
            contended_block=max(block // 2, MIN_BLOCK),
            epoch_limited=pair.epoch_limited or block < pair.block,  # (made room in the epoch)
        )
        extra = plan.total_steps - pair.total_steps
        fits = loader_len is None or plan.total_steps <= loader_len
        if cheap_only:
            if extra > CHEAP * pair.total_steps:
                return replace(pair, no_contention=_not_cheap(pair, extra, loader_len))
            if not fits:
                break
            return plan
        if fits:
            return plan
    if cheap_only:  # on by default: asked for, the pair's blocks would make room
        why = (
            f"no headroom split into waiting and CPU taken by default: an epoch of the "
            f"loader has {loader_len} batches, too few for a third arm beside the pair's "
            f"blocks of {pair.block} steps (it needs {extra} more); ask for it "
            "(contention=True, --contention) and the pair's blocks make room"
        )
    else:
        why = (
            f"no headroom split into waiting and CPU taken: an epoch of the loader has "
            f"{loader_len} batches, too few for a third arm beside the pair's blocks of "
            f"{MIN_BLOCK} steps (it needs {extra} more); pass fewer steps"
        )
    return replace(pair, no_contention=why)


def _not_cheap(pair: BlockPlan, extra: int, loader_len: Optional[int]) -> str:
    if loader_len is not None and pair.total_steps + extra > loader_len:
        # more steps would not lengthen the blocks: the epoch sets them
        how = f"the loader's epoch of {loader_len} batches leaves no room for longer blocks"
    else:
        how = "pass more steps, or ask for it (contention=True, --contention)"
    return (
        f"no headroom split into waiting and CPU taken by default: with blocks of "
        f"{pair.block} steps a third arm would add "
        f"{extra / pair.total_steps:.0%} to the pass (more than {CHEAP:.0%}); {how}"
    )


def fewest_steps(
    warmup: int, num_cached_batches: int, depth: int, variant_depth: Optional[int] = None
) -> int:
    """The fewest loop steps (every arm's) a pass of interleaved blocks takes; with a
    variant arm whose loader prefetches ``variant_depth`` batches, its blocks too."""
    first = max(warmup, num_cached_batches, 1)
    if variant_depth is None:
        return BlockPlan(first, MIN_BLOCK, MIN_BLOCKS, 2 * depth + 1, max(depth, 1)).total_steps
    return BlockPlan(
        first,
        MIN_BLOCK,
        MIN_BLOCKS,
        2 * depth + 1,
        max(depth, 1),
        (*SIDES, VARIANT),
        variant_drain=2 * variant_depth + 1,
    ).total_steps


def too_short(
    steps: Any,
    warmup: int,
    num_cached_batches: int,
    depth: int,
    loader_len: Optional[int],
    variant_depth: Optional[int] = None,
) -> str:
    """Why a pass cannot be interleaved, in words a front end can put after "because"
    (``variant_depth``: the pass has a variant arm, whose blocks need room too)."""
    need = fewest_steps(warmup, num_cached_batches, depth, variant_depth)
    if loader_len is not None and loader_len < need:
        arm = " with the variant arm" if variant_depth is not None else ""
        return (
            f"an epoch of the loader has {loader_len} batches and interleaved blocks{arm} "
            f"need {need} ({_first_words(warmup, num_cached_batches)}, 2 blocks of "
            f"{MIN_BLOCK} steps a side, {2 * depth + 1} drained "
            f"step{'s' if depth else ''})"
        )
    return f"{steps} steps a side are too few for 2 blocks of {MIN_BLOCK} steps a side"


def _first_words(warmup: int, num_cached_batches: int) -> str:
    """The pass's first real steps, named by what sets them: the warm-up, or the cache fill
    where it is longer."""
    if num_cached_batches > warmup:
        return f"the cache fill of {num_cached_batches} before the first block"
    return f"warm-up {max(warmup, 1)}"


class PassPlan(NamedTuple):
    """A pass's plan as :func:`plan_pass` made it, handed to the pass (``planned=``),
    which does not plan again."""

    blocks: BlockPlan
    """The arms' blocks, in their order."""
    loader_len: Optional[int]
    """The epoch the pass fits in (None: the loader's ``len()`` does not bound it)."""
    ranks: int
    """Ranks that agreed on it (1 without a process group)."""
    variant: Any = None
    """The variant arm's rebuilt loader: built once, for the plan (its queue's depth) and
    the pass (its batches)."""


def plan_pass(
    loader: Any,
    *,
    steps: int,
    warmup: int,
    num_cached_batches: int,
    blocks: Optional[int] = None,
    auto_stop: Optional[AutoStop] = None,
    contention: Optional[bool] = False,
    variant: Any = None,
) -> PassPlan:
    """The one rule for whether, and how, a pass over ``loader`` interleaves: its plan,
    made before its first step from the settings, the loader's ``len()`` and queue depth,
    and the process group — never from timing seen on the way. Under
    ``torch.distributed`` the ranks agree first (the smallest epoch, the deepest queue),
    so every rank holds the same plan and runs the same number of loop steps; settings
    that differ between ranks are one sentence. ``contention``: a third arm
    (:data:`CONTENDED`) in every round; None: where it is cheap (:data:`CHEAP`). A loader
    without workers (on any rank) gets none: it loads in the loop's own thread. Where the
    arm was asked for or would be on and is not, the plan's ``no_contention`` says why.
    ``variant``: the rebuilt loader of a variant arm (:mod:`.variant`), its blocks in every
    round after the ideal's (R I V V I R), its queue's depth setting the steps its blocks
    leave out.
    Returns the :class:`PassPlan` (the plan, the epoch it fits in, the ranks that agreed,
    the variant's loader); raises
    :class:`NotInterleavable` when the pass is too short."""
    depth, n, ranks = queue_depth(loader), safe_len(loader), 1
    vdepth = queue_depth(variant) if variant is not None else 0
    arms = (*SIDES, VARIANT) if variant is not None else SIDES
    fewest = depth
    agreed = agree(
        "plan of the interleaved pass",
        {
            "depth": depth,
            "len": n,
            "steps": steps,
            "warmup": warmup,
            "cache": num_cached_batches,
            "blocks": blocks,
            "auto": auto_stop is not None,
            "contention": contention,
            "variant": vdepth if variant is not None else None,
        },
    )
    if agreed is not None:
        ranks = len(agreed)
        _same_settings(agreed)
        depth = max(a["depth"] for a in agreed)
        if variant is not None:
            vdepth = max(a.get("variant") or 0 for a in agreed)
        fewest = min(a["depth"] for a in agreed)
        lens = [a["len"] for a in agreed if a["len"] is not None]
        n = min(lens) if lens else None
    if auto_stop is not None:  # two A B B A cycles first; more as the stop rule asks
        first_steps = max(auto_stop.min_steps, 2 * MIN_BLOCK * 2) + warmup
        plan = plan_blocks(first_steps, warmup, num_cached_batches, depth, n, 2, arms, vdepth)
    else:
        plan = plan_blocks(steps, warmup, num_cached_batches, depth, n, blocks, arms, vdepth)
    if plan is None:
        vd = vdepth if variant is not None else None
        raise NotInterleavable(
            too_short(steps, warmup, num_cached_batches, depth, n, vd),
            epoch_limited=n is not None and n < fewest_steps(warmup, num_cached_batches, depth, vd),
        )
    if contention is not False:
        if fewest == 0:
            plan = replace(plan, no_contention=NO_WORKERS)
        else:
            plan = add_contention(plan, n, cheap_only=contention is None)
    return PassPlan(plan, n, ranks, variant)


NO_WORKERS = (
    "no headroom split into waiting and CPU taken: the loader has no workers "
    "(num_workers=0), so it loads in the loop's own thread, never beside the step, and "
    "all its headroom is the loop's own time spent loading"
)
"""Why a loader without workers gets no contended arm."""


class NotInterleavable(LoadEvalError):
    """A pass too short for interleaved blocks (``reason`` says why): the front ends run
    the sides one after the other instead, and say so."""

    def __init__(self, reason: str, epoch_limited: bool) -> None:
        self.reason = reason
        self.epoch_limited = epoch_limited
        # (said to a LoaderEvaluator(mode="pair") user, the only one who sees it: the
        # front ends and run_pair measure on the loop's epochs or in turn, and say so)
        turn = (
            "measure the sides one after the other: LoaderEvaluator(loader, mode='log'), then "
            "mode='replay'"
        )
        fix = (
            "measure it on the loop's own epochs, whole epochs a side in A B B A order, with "
            f"run_pair(loader, train), or {turn}"
            if epoch_limited
            else f"pass more steps, or {turn}"
        )
        super().__init__(f"Cannot interleave: {reason}; {fix}.")


def _same_settings(agreed: list[dict[str, Any]]) -> None:
    """Every rank must measure with the same settings: one sentence naming the first that
    does not."""
    for key in ("steps", "warmup", "cache", "blocks", "auto", "contention", "variant"):
        values = [a.get(key) for a in agreed]
        if len(set(map(str, values))) > 1:
            odd = next(r for r, v in enumerate(values) if v != values[0])
            raise LoadEvalError(
                f"Rank {odd} measures with {key}={values[odd]!r} where rank 0 has "
                f"{values[0]!r}: give every rank the same settings."
            )
