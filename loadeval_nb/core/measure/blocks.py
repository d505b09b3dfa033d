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

from dataclasses import dataclass
from typing import Any, Optional

from .._env import agree, loader_settings, safe_len
from ..errors import LoadEvalError
from ..record.run import SIDES
from .adaptive import AutoStop

CONTENDED = "contended"
"""The third arm: cached batches served while the real loader keeps producing (its
batches dropped), the ideal with the loader's CPU use still on the machine."""
ARMS_WITH_CONTENTION = (*SIDES, CONTENDED)

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
            change = self.drain if side == "real" else (self.settle or self.drain)
            skip = self.warmup if first and k == 0 else (change if side != before else 0)
            out.append((side, self.block + skip, skip))
            before = side
        return out

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
) -> Optional[BlockPlan]:
    """The plan for ``steps`` steps per side (warm-up included, as for a real run), with
    ``depth`` batches prefetched. With ``loader_len`` (the loader's ``len()``), the whole
    pass — both sides' blocks, the warm-up and the drained steps — fits in one epoch of the
    loader: the loop is handed no more batches than it would be without the tool, so a
    schedule sized from ``len(loader)`` runs as it would. None when the steps (or the
    epoch) are too few to interleave."""
    first = max(warmup, num_cached_batches, 1)
    drain, settle = 2 * depth + 1, max(depth, 1)
    steady = steps - warmup
    for n in [blocks] if blocks else range(MAX_BLOCKS, MIN_BLOCKS - 1, -2):
        # a side's steps hold its drained ones too (every other real block follows an
        # ideal one): the pass takes no longer than a real run and an ideal run would
        drains = (n // 2) * drain
        block = (steady - drains) // n
        if loader_len is not None:  # the pass, every step of it, within the epoch
            fixed = BlockPlan(first, 0, n, drain, settle, arms).total_steps
            block = min(block, (loader_len - fixed) // (len(arms) * n))
        if block >= MIN_BLOCK:
            return BlockPlan(first, block, n, drain, settle, arms)
    return None


def fewest_steps(warmup: int, num_cached_batches: int, depth: int) -> int:
    """The fewest loop steps (both sides) a pass of interleaved blocks takes."""
    first = max(warmup, num_cached_batches, 1)
    return BlockPlan(first, MIN_BLOCK, MIN_BLOCKS, 2 * depth + 1, max(depth, 1)).total_steps


def too_short(
    steps: Any, warmup: int, num_cached_batches: int, depth: int, loader_len: Optional[int]
) -> str:
    """Why a pass cannot be interleaved, in words a front end can put after "because"."""
    need = fewest_steps(warmup, num_cached_batches, depth)
    if loader_len is not None and loader_len < need:
        return (
            f"an epoch of the loader has {loader_len} batches and interleaved blocks need "
            f"{need} (warm-up {max(warmup, num_cached_batches, 1)}, 2 blocks of {MIN_BLOCK} "
            f"steps a side, {2 * depth + 1} drained step{'s' if depth else ''})"
        )
    return f"{steps} steps a side are too few for 2 blocks of {MIN_BLOCK} steps a side"


def plan_pass(
    loader: Any,
    *,
    steps: int,
    warmup: int,
    num_cached_batches: int,
    blocks: Optional[int] = None,
    auto_stop: Optional[AutoStop] = None,
    contention: bool = False,
) -> tuple[BlockPlan, Optional[int], int]:
    """The one rule for whether, and how, a pass over ``loader`` interleaves: its plan,
    made before its first step from the settings, the loader's ``len()`` and queue depth,
    and the process group — never from timing seen on the way. Under
    ``torch.distributed`` the ranks agree first (the smallest epoch, the deepest queue),
    so every rank holds the same plan and runs the same number of loop steps; settings
    that differ between ranks are one sentence. ``contention``: a third arm
    (:data:`CONTENDED`) in every round. Returns ``(plan, the epoch it fits in, ranks that
    agreed)``; raises :class:`NotInterleavable` when the pass is too short."""
    depth, n, ranks = queue_depth(loader), safe_len(loader), 1
    arms = ARMS_WITH_CONTENTION if contention else SIDES
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
        },
    )
    if agreed is not None:
        ranks = len(agreed)
        _same_settings(agreed)
        depth = max(a["depth"] for a in agreed)
        lens = [a["len"] for a in agreed if a["len"] is not None]
        n = min(lens) if lens else None
    if auto_stop is not None:  # two A B B A cycles first; more as the stop rule asks
        first_steps = max(auto_stop.min_steps, 2 * MIN_BLOCK * 2) + warmup
        plan = plan_blocks(first_steps, warmup, num_cached_batches, depth, n, 2, arms)
    else:
        plan = plan_blocks(steps, warmup, num_cached_batches, depth, n, blocks, arms)
    if plan is None:
        raise NotInterleavable(
            too_short(steps, warmup, num_cached_batches, depth, n),
            epoch_limited=n is not None and n < fewest_steps(warmup, num_cached_batches, depth),
        )
    return plan, n, ranks


class NotInterleavable(LoadEvalError):
    """A pass too short for interleaved blocks (``reason`` says why): the front ends run
    the sides one after the other instead, and say so."""

    def __init__(self, reason: str, epoch_limited: bool) -> None:
        self.reason = reason
        self.epoch_limited = epoch_limited
        fix = (
            "measure the real and the ideal run one after the other (interleave=False)"
            if epoch_limited
            else "pass more steps, or measure the sides one after the other (interleave=False)"
        )
        super().__init__(f"Cannot interleave: {reason}; {fix}.")


def _same_settings(agreed: list[dict[str, Any]]) -> None:
    """Every rank must measure with the same settings: one sentence naming the first that
    does not."""
    for key in ("steps", "warmup", "cache", "blocks", "auto", "contention"):
        values = [a[key] for a in agreed]
        if len(set(map(str, values))) > 1:
            odd = next(r for r, v in enumerate(values) if v != values[0])
            raise LoadEvalError(
                f"Rank {odd} measures with {key}={values[odd]!r} where rank 0 has "
                f"{values[0]!r}: give every rank the same settings."
            )
