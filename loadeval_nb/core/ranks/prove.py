"""Running the straggler proof: the ranks agree on the suspect and the control, the
plan of blocks after the pair (:func:`plan_proof_after`), the pass that serves them
(:class:`ProvingPass`, :func:`prove_straggler`) and the judgement gathered over the group."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from .._env import agree, dist_rank, safe_len
from ..errors import LoadEvalError
from ..explore.settings import RunSettings
from ..explore.straggler import (
    ARMS,
    CONTROL,
    FREE,
    BlockSpan,
    StragglerPass,
    plan_proof,
    run_pass,
)
from ..measure.blocks import BlockPlan, queue_depth
from .proof import StragglerProof, straggler_proof
from .skew import RanksResult


def prove_straggler(
    loader: Any,
    run_once: Callable[[Any], None],
    ranks: RanksResult,
    settings: Optional[RunSettings] = None,
    *,
    group: Any = None,
    timeout_s: Optional[float] = None,
) -> StragglerProof:
    """Prove or clear the straggler ``ranks`` suspects (:attr:`RanksResult.suspect`:
    :func:`gather_pair`'s straggler, else the rank that waits most), by a counterfactual:
    call it on every rank after :func:`gather_pair`, with the same loader and loop.

    It runs ``run_once`` once more, over one epoch of ``loader``, in blocks of three arms
    in A B C C B A order: in the ``real`` blocks every rank serves its loader's batches;
    in the ``free`` blocks the suspect serves its cached batches (the ideal side's
    replay: its loader taken out of the job) while every other rank keeps its real
    loader; in the ``control`` blocks the runner-up (:attr:`RanksResult.runner_up`) does
    so instead. The suspect is proven the straggler when every rank's step falls in the
    free blocks (the block-paired 95 % interval of the gain above zero, the gain at least
    :data:`MIN_GAIN_SHARE` of the step) and falls further than in the control blocks (the
    same test of the difference): among ranks that load alike, freeing any one shortens
    the step a little, as the step waits for whichever rank's batch is late. The gain,
    with its interval, is what freeing the suspect's loader buys the whole job. If the
    step does not recover, the suspect is not a straggler, whatever the skew said.
    ``settings`` (default :class:`RunSettings`'s) gives the steps per arm (warm-up
    included), ``warmup``, ``num_cached_batches`` and ``cache_on``; no run log is written.

    The ranks agree first, through the process group's store: the suspect and the
    control are rank 0's, the plan is made from the smallest epoch and the deepest queue
    of every rank, so every rank's loop runs the same number of steps. Every rank gets
    the same :class:`StragglerProof`; rank 0 usually prints it.

    Raises :class:`~loadeval_nb.LoadEvalError` when ``torch.distributed`` is not
    initialised, when ``ranks`` suspects no rank, when the ranks' settings differ or the
    epoch is too short for blocks, and re-raises what ``run_once`` raised (after a line
    on stderr, so that torchrun stops the other ranks).
    """
    where = dist_rank()
    if where is None:
        raise LoadEvalError(
            "prove_straggler needs torch.distributed: call dist.init_process_group() first "
            "(torchrun sets up the environment it reads)."
        )
    if not isinstance(ranks, RanksResult):
        raise LoadEvalError(
            "prove_straggler takes the ranks' first measurement: pass ranks=gather_pair(result)."
        )
    settings = settings or RunSettings()
    if not isinstance(settings.steps, int):
        raise LoadEvalError(
            f"prove_straggler needs a number of steps per arm, not steps={settings.steps!r}; "
            "pass RunSettings(steps=200)."
        )
    mine = {
        "suspect": ranks.suspect,
        "control": ranks.runner_up if ranks.runner_up != ranks.suspect else None,
        "depth": queue_depth(loader),
        "len": safe_len(loader),
        "steps": settings.steps,
        "warmup": settings.warmup,
        "cache": settings.num_cached_batches,
    }
    agreed = agree("plan of the straggler proof", mine, timeout_s) or [mine]
    for key in ("steps", "warmup", "cache"):
        odd = next((r for r, a in enumerate(agreed) if a[key] != agreed[0][key]), None)
        if odd is not None:
            raise LoadEvalError(
                f"Rank {odd} proves with {key}={agreed[odd][key]!r} where rank 0 has "
                f"{agreed[0][key]!r}: give every rank the same settings."
            )
    # rank 0's word: every rank replays on the same ranks
    suspect, control = agreed[0]["suspect"], agreed[0]["control"]
    if suspect is None:
        raise LoadEvalError(
            "No rank to put to the proof: the first measurement has no real run on any rank; "
            "measure the pair first (run_pair, then gather_pair)."
        )
    depth = max(a["depth"] for a in agreed)
    lens = [a["len"] for a in agreed if a["len"] is not None]
    epoch = min(lens) if lens else None
    warmup, cached = settings.warmup, settings.num_cached_batches
    arms = ARMS if control is not None else ARMS[:2]
    plan = plan_proof(settings.steps, warmup, cached, depth, epoch, arms)
    try:
        spans = run_pass(
            loader,
            run_once,
            plan,
            replay_in={suspect: FREE, control: CONTROL}.get(where[0]),
            num_cached_batches=cached,
            cache_on=settings.cache_on,
        )
    except BaseException as e:
        print(
            f"loadeval_nb: rank {where[0]} stops: its straggler proof's pass failed "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); if another "
            "rank failed first, its traceback holds the cause.",
            file=sys.stderr,
        )
        raise
    return _judge(spans, suspect, control, ranks.straggler == suspect, group, timeout_s)


def _judge(
    spans: Sequence[BlockSpan],
    suspect: int,
    control: Optional[int],
    named_by_skew: bool,
    group: Any,
    timeout_s: Optional[float],
) -> StragglerProof:
    """Every rank's measured blocks gathered (every rank calls it), judged."""
    import torch.distributed as dist

    where = dist_rank()
    assert where is not None  # (asked before the pass)
    payload = (where[0], [(b.arm, b.steps, b.span_ns) for b in spans])
    gathered: list[Any] = (
        [None] * where[1] if group is None else [None] * dist.get_world_size(group)
    )
    agree("gathering of the straggler proof", where[0], timeout_s)
    dist.all_gather_object(gathered, payload, group=group)
    blocks = {int(g[0]): g[1] for g in gathered if g is not None}
    return straggler_proof(blocks, suspect, control, named_by_skew=named_by_skew)


def plan_proof_after(pair: BlockPlan, epoch: Optional[int], settings: RunSettings) -> BlockPlan:
    """The proof's plan for a loop that goes on over it after an interleaved pair's
    ``pair`` plan, in the same pass (the script runner's ``--prove-straggler``): ``steps``
    per arm, its drains those of the pair's agreed queue depth, the whole pass — the pair
    and the proof — within ``epoch`` (the pair's agreed epoch; None: no end). Every rank
    makes the same plan from the same agreed pair. Raises
    :class:`~loadeval_nb.LoadEvalError` when the epoch's rest is too short for blocks."""
    if not isinstance(settings.steps, int):
        raise LoadEvalError(
            f"The straggler proof needs a number of steps per arm, not steps={settings.steps!r}."
        )
    depth = (pair.drain - 1) // 2
    room = None if epoch is None else epoch - pair.total_steps
    return plan_proof(settings.steps, settings.warmup, settings.num_cached_batches, depth, room)


class ProvingPass:
    """The straggler proof's pass for a loop that already runs (the script runner's: the
    script's own loop goes on over it after the pair, in the same pass): made on every
    rank once the ranks' pairs are gathered (``ranks``), with the same ``plan``
    (:func:`plan_proof_after`). The ranks agree first, through the process group's store,
    on rank 0's suspect and control; iterate it for the pass's batches (``len()`` of
    them), then call :meth:`judge` on every rank for the :class:`StragglerProof` (a
    collective). :meth:`release` lets go of the cached batches."""

    def __init__(
        self,
        loader: Any,
        plan: BlockPlan,
        ranks: RanksResult,
        settings: RunSettings,
        *,
        group: Any = None,
        timeout_s: Optional[float] = None,
    ) -> None:
        where = dist_rank()
        if where is None:
            raise LoadEvalError(
                "The straggler proof needs torch.distributed: call dist.init_process_group() "
                "first (torchrun sets up the environment it reads)."
            )
        mine = {
            "suspect": ranks.suspect,
            "control": ranks.runner_up if ranks.runner_up != ranks.suspect else None,
        }
        agreed = agree("suspect of the straggler proof", mine, timeout_s) or [mine]
        self.suspect: Optional[int] = agreed[0]["suspect"]  # rank 0's word
        self.control: Optional[int] = agreed[0]["control"] if self.suspect is not None else None
        self.named_by_skew = ranks.straggler is not None and ranks.straggler == self.suspect
        self.group, self.timeout_s = group, timeout_s
        self._pass = StragglerPass(
            loader,
            plan,
            replay_in={self.suspect: FREE, self.control: CONTROL}.get(where[0]),
            num_cached_batches=settings.num_cached_batches,
            cache_on=settings.cache_on,
        )

    def __len__(self) -> int:
        return len(self._pass)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._pass)

    @property
    def blocks_done(self) -> int:
        """Blocks measured so far (on this rank)."""
        return len(self._pass.blocks)

    @property
    def complete(self) -> bool:
        """Every block of the plan was measured (on this rank)."""
        return self.blocks_done == len(self._pass.plan.block_steps())

    def judge(self) -> Optional[StragglerProof]:
        """Every rank's blocks gathered and judged (every rank calls it); None where no
        rank was put to the proof (no real run on any rank)."""
        if self.suspect is None:
            return None
        return _judge(
            self._pass.blocks, self.suspect, self.control, self.named_by_skew, self.group,
            self.timeout_s,
        )  # fmt: skip

    def release(self) -> None:
        self._pass.release()
