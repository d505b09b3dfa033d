"""The wrapper each kind of child puts around the script's training loader: a log-mode
:class:`~loadeval_nb.LoaderEvaluator` (the real run), a replay one (the ideal run), or
a ``LoaderEvaluator(loader, mode="pair")`` that measures both in blocks (the pair),
each built from the run's settings as the parent checked them."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ....core._shared import (
    EpochPair,
    PairPlan,
    epoch_pair,
    evaluator_for,
    log_path,
    pair_keywords,
    pass_plan,
    plan_pair,
)
from ....core.errors import LoadEvalError
from ....core.explore import RunSettings
from ....core.measure import LoaderEvaluator
from ..words import said_as_flag
from .pick import Refused, Side
from .proof import NO_GROUP, ProvedPair, in_process_group, proof_misfit


def pair_evaluator(
    loader: Any,
    settings: RunSettings,
    claim: Callable[[tuple[str, ...]], dict[str, str]],
    planned: Any = None,
) -> Any:
    """The wrapper that measures ``loader``'s arms interleaved in one pass, on the plan
    the core made for it (:func:`plan_pair`, once; made here where none is given: a pass
    too short raises ``NotInterleavable``); the logs' names are claimed for the arms the
    plan serves (``claim``), and the plan is handed to the pass, which does not plan
    again."""
    planned = planned if planned is not None else pass_plan(loader, settings)
    files: dict[str, Optional[str]] = dict(claim(tuple(planned.blocks.arms)))
    return LoaderEvaluator(
        loader, mode="pair", **pair_keywords(loader, settings), metrics_files=files, planned=planned
    )


def side_for(
    which: str,
    settings: RunSettings,
    stamp: str,
    label: str,
    prove_straggler: bool = False,
    one_pass: bool = False,
) -> Side:
    """The :class:`Side` a child of kind ``which`` ("real", "ideal", "pair") measures
    (a pair whose loader's epoch is too short for blocks: on the loop's own epochs, an
    :class:`~loadeval_nb.core.measure.epochs.EpochPair`), its logs named as the pair
    names them (``...-real.json``, ``...-real-rank0.json`` under ranks), for the runs it
    writes: a pair's, the arms its plan serves. ``prove_straggler``: the pair's pass goes
    on with the straggler proof (:class:`~.proof.ProvedPair`). ``one_pass``: no second run
    will come (the user's launcher), so a pair too short is refused, not measured as its
    real side alone."""

    def path(name: str) -> str:
        out = log_path(settings, stamp, label, name)
        assert out is not None  # a child always has a log folder
        return out

    def plan(loader: Any) -> PairPlan:
        # the core's one rule (and, under a process group, every rank's same answer);
        # the straggler proof's blocks must fit after the pair's in the same epoch
        if prove_straggler and not in_process_group():  # before the pair starts anything
            raise LoadEvalError(NO_GROUP)
        made = plan_pair(loader, settings)
        if prove_straggler and made.method == "blocks":
            why = proof_misfit(made.planned, settings)
            if why is not None:
                return PairPlan("runs", why=why)
        return made

    def make(
        loader: Any, claim: Callable[[tuple[str, ...]], dict[str, str]], planned: Any = None
    ) -> Any:
        if which != "pair":
            return evaluator_for(loader, which, settings, metrics_file=claim((which,))[which])
        if not prove_straggler:
            return pair_evaluator(loader, settings, claim, planned)
        return ProvedPair(
            pair_evaluator(loader, settings, claim, planned), settings, claim(("real",))["real"]
        )

    def make_epochs(loader: Any, claim: Callable[[tuple[str, ...]], dict[str, str]]) -> EpochPair:
        try:  # (the core's one builder: whole epochs a side, the variant a third)
            return epoch_pair(loader, settings, claim)
        except LoadEvalError as e:  # one sentence, as a pass of blocks says it
            raise Refused(said_as_flag(e)) from None

    def make_real(loader: Any, claim: Callable[[tuple[str, ...]], dict[str, str]]) -> Any:
        # a pair too short for blocks and for the loop's epochs: this run measures the
        # real side alone, and one more run of the script the ideal side
        return evaluator_for(loader, "real", settings, metrics_file=claim(("real",))["real"])

    pair = which == "pair" and not prove_straggler
    alone = pair and not one_pass  # (a second run measures the ideal side)
    return Side(
        make,
        path,
        make_epochs if pair else None,
        make_real if alone else None,
        plan if which == "pair" else None,
    )
